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
#include "io/results.h"

namespace loom {
namespace {

std::atomic<bool> g_stop{false};
extern "C" void on_signal(int) { g_stop.store(true); }

}  // namespace

int run_command(const RunArgs& a) {
  OpenedModel om = open_model(a.model, a.engine, a.quiet);
  const ModelSpec& spec = om.model.spec;

  JobDefaults defaults;
  defaults.placeholder_id = a.placeholder_id;
  defaults.overlap = a.overlap;
  JobReader reader(a.jobs, spec, defaults);
  ResultWriter writer(a.out, a.resume);

  EngineOptions opt = engine_options(a.engine);
  opt.stop = &g_stop;
  Progress progress(count_job_lines(a.jobs), a.progress_interval, a.quiet);
  opt.on_progress = [&](const RunStats& st) { progress.update(st); };

  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);

  Engine engine(spec, *om.backend, opt);
  RunStats st = engine.run(
      [&](Job& job, JobError& err, bool& ok) { return reader.next(job, err, ok); },
      [&](const JobResult& r) { writer.write(r); });
  writer.sync();
  progress.update(st, true);
  progress.finish();

  RunContext ctx;
  ctx.model_dir = a.model;
  ctx.jobs_path = a.jobs;
  ctx.out_path = a.out;
  ctx.backend = om.backend_name;
  ctx.dtype = om.dtype_name;
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
    std::fprintf(stderr, "loom: results in %s%s%s\n", a.out == "-" ? "stdout" : a.out.c_str(),
                 a.report.empty() ? "" : ", report in ", a.report.c_str());
  }
  if (st.stopped) return kExitInterrupted;
  return st.jobs_failed > 0 ? kExitJobsFailed : kExitOk;
}

int merge_command(const std::vector<std::string>&, const std::string&, const std::string&) {
  fail("merge: not wired yet");
}

int bench_command(const BenchArgs&) { fail("bench: not wired yet"); }

}  // namespace loom
