// `loom run`: jobs file → engine → results file (+ report, dataset files). Owns the run's
// outer life: shards, resume, signals, progress, exit code.
#include <csignal>
#include <cstdio>
#include <fstream>

#include "app/commands.h"
#include "app/progress.h"
#include "app/setup.h"
#include "core/error.h"
#include "engine/report.h"
#include "io/jobs.h"
#include "io/merge.h"
#include "io/results.h"
#include "io/resume.h"
#include "io/shard.h"
#include "io/tokens_out.h"

namespace loom {
namespace {

std::atomic<bool> g_stop{false};
extern "C" void on_signal(int) {
  g_stop.store(true);
}

}  // namespace

int run_command(const RunArgs& a) {
  // The cheap checks first, so a bad flag does not wait for a 4 GB checkpoint to load.
  // Shards: this process keeps every N-th job line and writes its own results file.
  const Shard shard = resolve_shard(a.shard);
  // Printed under -q too: tasks that share one jobs file would each run all of it, unnoticed.
  const std::string shard_warning = a.shard.empty() ? unrequested_shard_warning() : "";
  if (!shard_warning.empty()) std::fprintf(stderr, "loom: warning: %s\n", shard_warning.c_str());
  const std::string out_path = shard_path(a.out, shard);
  ResumeState done;
  if (a.resume) {
    LOOM_CHECK(out_path != "-", "--resume needs --out to be a file, not stdout");
    done = scan_results(out_path);
    if (!a.quiet && done.dropped_bytes > 0)
      std::fprintf(stderr, "loom: resume: cut a torn last line (line %lld, %lld bytes) from %s\n",
                   (long long)done.dropped_line, (long long)done.dropped_bytes, out_path.c_str());
  }

  OpenedModel om = open_model(a.model, a.engine, a.quiet);
  const ModelSpec& spec = om.model.spec;
  JobDefaults defaults;
  defaults.placeholder_id = a.placeholder_id;
  defaults.overlap = a.overlap;
  JobReader reader(a.jobs, spec, defaults);
  reader.set_shard(shard.index, shard.count);  // other shards' lines are skipped unparsed
  ResultWriter writer(out_path, a.resume);
  if (!a.quiet && shard.count > 1)
    std::fprintf(stderr, "loom: shard %d/%d (from %s) writing %s\n", shard.index, shard.count,
                 shard.source.c_str(), out_path.c_str());

  EngineOptions opt = engine_options(a.engine);
  opt.stop = &g_stop;
  if (a.resume) opt.keep_sample = [&](const Job& job, uint32_t k) { return !done.skip(job.id, k); };
  int64_t total = count_job_lines(a.jobs);
  if (total > 0 && shard.count > 1) total = (total - shard.index + shard.count - 1) / shard.count;
  Progress progress(total, a.progress_interval, a.quiet);
  opt.on_progress = [&](const RunStats& st) { progress.update(st); };

  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);

  auto source = [&](Job& job, JobError& err, bool& ok) {
    while (reader.next(job, err, ok))
      if (!(a.resume && !ok && done.failed(err.id))) return true;  // else: its record is written
    return false;
  };
  const std::string model_name = om.model.spec.architecture + ":" + a.model;
  // Every record is flushed as it is written; fsync every few seconds bounds what a power
  // loss (not just a crash) can take, without a disk flush per record.
  constexpr double kSyncInterval_s = 5.0;
  double last_sync = now_seconds();
  auto sink = [&](const JobResult& r) {
    writer.write(r);
    if (now_seconds() - last_sync > kSyncInterval_s) {
      writer.sync();
      last_sync = now_seconds();
    }
    if (!a.tokens_out.empty() && r.ok)
      write_tokens_safetensors(a.tokens_out, r, model_name, r.seed);
  };
  Engine engine(spec, *om.backend, opt);
  RunStats st = engine.run(source, sink);
  writer.sync();
  progress.update(st, true);
  progress.finish();

  RunContext ctx;
  ctx.model_dir = a.model;
  ctx.jobs_path = a.jobs;
  ctx.out_path = out_path;
  ctx.backend = om.backend_name;
  ctx.dtype = om.dtype_name;
  ctx.batch_invariant = om.batch_invariant;
  ctx.load_s = om.load_s;
  ctx.step_bytes = om.model.step_bytes;
  ctx.device = om.backend->device_info();
  if (!a.report.empty()) {
    std::ofstream rep(a.report);
    LOOM_CHECK(rep.good(), "cannot write the report to ", a.report,
               "; check the directory exists and is writable");
    rep << run_report(st, ctx).dump(2) << "\n";
  }
  if (!a.quiet) {
    std::fputs(run_summary(st, ctx).c_str(), stderr);
    std::fprintf(stderr, "loom: results in %s%s%s\n", out_path == "-" ? "stdout" : out_path.c_str(),
                 a.report.empty() ? "" : ", report in ", a.report.c_str());
  }
  if (st.stopped) return kExitInterrupted;
  return st.jobs_failed > 0 ? kExitJobsFailed : kExitOk;
}

int merge_command(const std::vector<std::string>& inputs, const std::string& jobs,
                  const std::string& out) {
  const MergeCounts c = merge_results(inputs, jobs, out);
  std::fprintf(stderr, "loom: merged %lld files: %lld records (%lld ok, %lld errors)%s into %s\n",
               (long long)c.files, (long long)c.records, (long long)c.ok, (long long)c.errors,
               jobs.empty() ? "" : cat(", all ", c.jobs, " jobs present").c_str(),
               out == "-" ? "stdout" : out.c_str());
  return c.errors > 0 ? kExitJobsFailed : kExitOk;
}

}  // namespace loom
