// `loom calibrate`: FP8 KV scales for a model from rollouts of real jobs (README "FP8 KV
// cache"). The jobs run with the KV cache in the compute dtype while the backend records the
// absolute maximum of every K (after RoPE) and V value written, per (layer, kv head). Every
// fourth job (--held-out-every) is held out: the scales come from the others, as
// s = absmax · margin / 448, and the held-out run counts the elements those scales would
// saturate. Scales that saturate more than 1e-5 of the held-out elements are refused.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "app/commands.h"
#include "app/log.h"
#include "app/setup.h"
#include "core/error.h"
#include "core/fp8.h"
#include "io/jobs.h"
#include "io/kv_scales.h"
#include "io/outputs.h"

namespace loom {
namespace {

constexpr double kMaxSaturated = 1e-5;

// Runs `jobs` to completion; a failed job fails the calibration (its rollout is missing).
void run_jobs(Backend& backend, const ModelSpec& spec, const EngineOptions& opt,
              const std::vector<Job>& jobs) {
  Engine engine(spec, backend, opt);
  size_t next = 0;
  engine.run(
      [&](Job& j, JobError&, bool& ok) {
        if (next == jobs.size()) return false;
        j = jobs[next++];
        ok = true;
        return true;
      },
      [&](const JobResult& r) { LOOM_CHECK(r.ok, "calibrate: job ", r.id, " failed: ", r.error); });
}

}  // namespace

int calibrate_command(const CalibrateArgs& a) {
  LOOM_CHECK(a.engine.kv_dtype != "fp8",
             "calibrate: --kv-dtype fp8 given; calibration measures K and V with the KV cache in "
             "the compute dtype (drop --kv-dtype)");
  LOOM_CHECK(a.engine.kv_scales.empty(), "calibrate: --kv-scales given; calibrate makes them");
  // Checked before the rollouts; its folders made only when the scales pass.
  std::vector<std::string> inputs = model_inputs(a.model, a.engine);
  inputs.push_back(a.jobs);
  check_file_output("calibrate: ", "--out", a.out, a.overwrite, inputs);
  OpenedModel om = open_model(a.model, a.engine, false);
  const ModelSpec& spec = om.model.spec;

  JobDefaults defaults;
  defaults.placeholder_id = a.placeholder_id;
  defaults.overlap = a.overlap;
  defaults.overlap_given = a.overlap_given;
  std::vector<Job> fit, held;
  int64_t bad = 0;  // lines that are no valid job: exit 1, as `run` (the scales are written)
  {
    JobReader reader(a.jobs, spec, defaults);
    Job j;
    JobError e;
    bool ok = false;
    int64_t i = 0;
    std::string first_bad;
    while (reader.next(j, e, ok)) {
      if (!ok) {  // as `run` does: a bad line costs itself only, and is said
        if (bad++ == 0) first_bad = e.message;
        continue;
      }
      (i++ % a.held_out_every == a.held_out_every - 1 ? held : fit).push_back(j);
    }
    if (bad > 0)
      log_warning(cat("calibrate: ", bad, " line", bad > 1 ? "s" : "", " of ", a.jobs,
                      " skipped, no valid job (the first: ", first_bad, "); exit status 1"));
  }
  LOOM_CHECK(!fit.empty() && !held.empty(), "calibrate: ", a.jobs, " has ",
             fit.size() + held.size(), " jobs; it needs at least ", a.held_out_every, " (every ",
             a.held_out_every, "th is held out to check the scales)");

  EngineOptions opt = engine_options(a.engine, om);
  Backend& be = *om.backend;
  be.collect_kv_stats(nullptr);
  log_info(cat("calibrate: ", fit.size(), " jobs for the scales, ", held.size(), " held out"));
  run_jobs(be, spec, opt, fit);
  const KvStats fitted = be.kv_stats();

  KvScales s;
  s.layers = spec.layers, s.kv_heads = spec.kv_heads;
  for (float m : fitted.k_absmax) s.k.push_back(kv_scale_for(m, a.margin));
  for (float m : fitted.v_absmax) s.v.push_back(kv_scale_for(m, a.margin));
  if (a.granularity == "layer")  // one scale per layer: the largest over its heads
    for (int l = 0; l < s.layers; l++) {
      auto lk = s.k.begin() + long(l) * s.kv_heads, lv = s.v.begin() + long(l) * s.kv_heads;
      std::fill(lk, lk + s.kv_heads, *std::max_element(lk, lk + s.kv_heads));
      std::fill(lv, lv + s.kv_heads, *std::max_element(lv, lv + s.kv_heads));
    }

  be.collect_kv_stats(&s);
  run_jobs(be, spec, opt, held);
  const KvStats check = be.kv_stats();
  const double frac = double(check.saturated) / double(std::max<uint64_t>(1, check.elements));
  log_info(cat("calibrate: held-out run: ", check.saturated, " of ", check.elements,
               " K/V elements beyond 448 s (", frac, ")"));
  LOOM_CHECK(frac <= kMaxSaturated, "calibrate: the scales saturate ", frac,
             " of the held-out K/V elements (at most ", kMaxSaturated,
             " allowed); raise --margin or calibrate on more jobs; ", a.out, " not written");

  nlohmann::ordered_json extra;
  extra["margin"] = a.margin;
  extra["calibration"] = {{"model", a.model},
                          {"architecture", spec.architecture},
                          {"jobs", a.jobs},
                          {"fit_jobs", fit.size()},
                          {"held_out_jobs", held.size()},
                          {"fit_elements", fitted.elements},
                          {"held_out_elements", check.elements},
                          {"held_out_saturated", check.saturated},
                          {"held_out_saturated_fraction", frac},
                          {"backend", om.backend_name},
                          {"dtype", om.dtype_name},
                          {"created_utc", utc_now_iso()}};
  nlohmann::ordered_json absmax;
  absmax["k"] = fitted.k_absmax;
  absmax["v"] = fitted.v_absmax;
  extra["absmax"] = absmax;
  const std::string text = kv_scales_json(s, extra).dump(2) + "\n";
  const int code = bad > 0 ? kExitJobsFailed : kExitOk;
  if (a.out == "-") {
    LOOM_CHECK(std::fputs(text.c_str(), stdout) >= 0 && std::fflush(stdout) == 0,
               "calibrate: cannot write the scales to stdout: ", std::strerror(errno));
    return code;
  }
  create_parent_dirs("--out", a.out, false);
  write_file_atomic(a.out, text);
  log_info(cat("calibrate: wrote ", a.out));
  return code;
}

}  // namespace loom
