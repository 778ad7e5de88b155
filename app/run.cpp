// `loom run`: jobs file → engine → results file (+ report, dataset files). Owns the run's
// outer life: shards, resume, signals, progress, exit code.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>

#include "app/commands.h"
#include "app/progress.h"
#include "app/run_outputs.h"
#include "app/setup.h"
#include "core/error.h"
#include "core/fault.h"
#include "engine/report.h"
#include "io/dataset.h"
#include "io/jobs.h"
#include "io/merge.h"
#include "io/results.h"
#include "io/resume.h"
#include "io/sidecar.h"

namespace loom {
namespace {

std::atomic<bool> g_stop{false};
extern "C" void on_signal(int) {
  g_stop.store(true);
}

}  // namespace

int run_command(const RunArgs& a) {
  // A file-size limit must show up as EFBIG on write (a clear error), not kill the process.
  std::signal(SIGXFSZ, SIG_IGN);
  // The cheap checks first, so a bad flag or output does not wait for a 4 GB checkpoint.
  const BackendChoice choice = choose_backend(a.engine);
  RunOutputs o;
  prepare_outputs(a, choice.backend_name(), choice.dtype_name(), o);
  const bool with_dataset = !o.dataset.dir.empty();
  if (!a.quiet)
    std::fprintf(stderr, "loom: shard %d/%d (%s); results %s%s%s\n", o.shard.index, o.shard.count,
                 o.shard.source.c_str(), o.out_path == "-" ? "stdout" : o.out_path.c_str(),
                 with_dataset ? ", dataset " : "", o.dataset.dir.c_str());
  if (!o.sidecar.empty()) write_sidecar(o.sidecar, o.identity, "running");

  OpenedModel om = open_model(a.model, a.engine, choice, a.quiet);
  const ModelSpec& spec = om.model.spec;
  JobDefaults defaults;
  defaults.placeholder_id = a.placeholder_id;
  defaults.overlap = a.overlap;
  defaults.sampling = a.sampling;
  JobReader reader(a.jobs, spec, defaults);
  reader.set_shard(o.shard.index, o.shard.count);  // other shards' lines are skipped unparsed
  ResultWriter writer(o.out_path, a.resume);
  o.model.spec = spec;
  DatasetWriter dataset(o.dataset, o.model, o.reconciled);
  if (with_dataset && !a.resume) write_dataset_info(o.dataset, o.model, 0, 0, 0, "running");

  EngineOptions opt = engine_options(a.engine);
  opt.stop = &g_stop;
  ResumeState& done = o.done;
  if (a.resume)
    opt.keep_sample = [&](const Job& job, uint32_t k) { return !done.skip(job.line, k); };
  int64_t total = count_job_lines(a.jobs);
  if (total > 0 && o.shard.count > 1)
    total = (total - o.shard.index + o.shard.count - 1) / o.shard.count;
  Progress progress(total, a.progress_interval, a.quiet);

  // Every record is flushed as it is written; fsync every few seconds bounds what a power
  // loss (not just a crash) can take, without a disk flush per record.
  constexpr double kSyncInterval_s = 5.0;
  double last_sync = now_seconds();
  auto write_record = [&](const JobResult& r) {
    writer.write(r);
    fault_point("record");
    if (now_seconds() - last_sync > kSyncInterval_s) {
      writer.sync();
      last_sync = now_seconds();
    }
  };
  // Data before index: with a dataset, ok records wait until their file is durable.
  auto commit_dataset = [&] {
    for (const JobResult& r : dataset.commit()) write_record(r);
    writer.sync();
    last_sync = now_seconds();
  };
  opt.on_progress = [&](const RunStats& st) {
    progress.update(st);
    if (dataset.due(now_seconds())) commit_dataset();
  };
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);

  auto source = [&](Job& job, JobError& err, bool& ok) {
    while (reader.next(job, err, ok)) {
      // Records of another jobs file are refused (one CLI line, exit 2), not continued.
      if (a.resume) done.match_line(ok ? job.line : err.line, ok ? job.id : err.id);
      if (!(a.resume && !ok && done.failed(err.line))) return true;  // else: its record is written
    }
    return false;
  };
  auto sink = [&](const JobResult& r) {
    if (!with_dataset || !r.ok) return write_record(r);
    JobResult kept = r;
    kept.include_tokens = !a.no_tokens_in_results;
    dataset.add(kept, now_seconds());
    if (dataset.due(now_seconds())) commit_dataset();
  };
  Engine engine(spec, *om.backend, opt);
  RunContext ctx;
  ctx.started = std::chrono::system_clock::now();
  RunStats st = engine.run(source, sink);
  commit_dataset();
  if (a.resume && !st.stopped) done.check_all_matched(a.jobs);
  ctx.ended = std::chrono::system_clock::now();
  progress.update(st, true);
  progress.finish();

  ctx.model_dir = a.model;
  ctx.jobs_path = a.jobs;
  ctx.out_path = o.out_path;
  ctx.backend = om.backend_name;
  ctx.dtype = om.dtype_name;
  ctx.batch_invariant = om.batch_invariant;
  ctx.load_s = om.load_s;
  ctx.step_bytes = om.model.step_bytes;
  ctx.device = om.backend->device_info();
  ctx.shard_index = o.shard.index;
  ctx.shard_count = o.shard.count;
  if (!o.report_path.empty()) {
    nlohmann::json rep = run_report(st, ctx);
    if (with_dataset) rep["dataset"] = o.dataset.dir;
    const std::string text = rep.dump(2) + "\n";
    if (o.report_path == "-") {
      std::fputs(text.c_str(), stdout);
    } else {
      write_file_atomic(o.report_path, text);
    }
  }
  const char* state = st.stopped ? "stopped" : "complete";
  if (with_dataset) dataset.finish(state);
  if (!o.sidecar.empty()) write_sidecar(o.sidecar, o.identity, state);
  if (!a.quiet) {
    std::fputs(run_summary(st, ctx).c_str(), stderr);
    std::fprintf(stderr, "loom: results in %s%s%s\n",
                 o.out_path == "-" ? "stdout" : o.out_path.c_str(),
                 o.report_path.empty() ? "" : ", report in ",
                 o.report_path == "-" ? "stdout" : o.report_path.c_str());
  }
  if (st.stopped) return kExitInterrupted;
  return st.jobs_failed > 0 ? kExitJobsFailed : kExitOk;
}

int merge_command(const MergeArgs& m) {
  const int forms = !m.inputs.empty() + !m.reports.empty() + !m.dataset.empty();
  LOOM_CHECK(forms == 1,
             "merge: expected one of: result files, --reports FILES, or --dataset "
             "DIR; found ",
             forms == 0 ? "none" : "more than one");
  if (!m.reports.empty()) {
    LOOM_CHECK(!m.out.empty(), "merge --reports: expected --out FILE for the merged report");
    LOOM_CHECK(m.jobs.empty(), "merge --reports: --jobs belongs to merging results files");
    return merge_reports_command(m.reports, m.out);
  }
  if (!m.dataset.empty()) {
    LOOM_CHECK(m.out.empty() && m.jobs.empty(),
               "merge --dataset DIR writes DIR/manifest.jsonl "
               "and DIR/dataset.json; expected no --out or --jobs with it");
    const DatasetMerge d = merge_dataset(m.dataset, m.allow_partial);
    std::fprintf(stderr,
                 "loom: merged %zu of %d dataset shards: %lld samples, %lld rows in %lld files "
                 "into %s/manifest.jsonl\n",
                 d.merged.size(), d.shard_count, (long long)d.samples, (long long)d.rows,
                 (long long)d.files, m.dataset.c_str());
    if (d.missing.empty() && d.unfinished.empty()) return kExitOk;
    std::string list;
    for (int k : d.missing) list += cat(list.empty() ? "" : ", ", k);
    std::fprintf(stderr, "loom: warning: partial dataset: missing shards [%s], %zu unfinished\n",
                 list.c_str(), d.unfinished.size());
    return kExitJobsFailed;
  }
  LOOM_CHECK(!m.out.empty(), "merge: expected --out FILE for the merged results");
  MergeOptions mo;
  mo.allow_partial = m.allow_partial;
  const MergeCounts c = merge_results(m.inputs, m.jobs, m.out, mo);
  std::fprintf(
      stderr, "loom: merged %lld files: %lld records (%lld ok, %lld errors)%s into %s\n",
      (long long)c.files, (long long)c.records, (long long)c.ok, (long long)c.errors,
      m.jobs.empty() || !c.complete() ? "" : cat(", all ", c.jobs, " jobs present").c_str(),
      m.out == "-" ? "stdout" : m.out.c_str());
  if (!c.complete())
    std::fprintf(stderr, "loom: warning: partial merge: %s\n", merge_missing_summary(c).c_str());
  return !c.complete() || c.errors > 0 ? kExitJobsFailed : kExitOk;
}

}  // namespace loom
