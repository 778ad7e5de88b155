// `loom run`: jobs file → engine → results file (+ report, dataset files). Owns the run's
// outer life: shards, resume, signals, the log (banner, progress, error summary), provenance,
// exit code.
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>

#include "app/commands.h"
#include "app/log.h"
#include "app/progress.h"
#include "app/run_outputs.h"
#include "app/setup.h"
#include "core/error.h"
#include "core/fault.h"
#include "core/fnv.h"
#include "engine/report.h"
#include "io/dataset.h"
#include "io/jobs.h"
#include "io/merge.h"
#include "io/outputs.h"
#include "io/provenance.h"
#include "io/results.h"
#include "io/resume.h"
#include "io/sidecar.h"

namespace loom {
namespace {

std::atomic<bool> g_stop{false};
// The first stop signal asks the run to stop where it is safe to; a second one ends the process
// at once (as kill -9 would: --resume continues from what is on disk), e.g. a second Ctrl-C
// during a long checkpoint load, which the loader does not interrupt.
extern "C" void on_signal(int sig) {
  if (!g_stop.exchange(true)) return;
  die_by_signal(sig);  // (the temporary file of an atomic write in progress removed)
}

// A stop signal before the first job ran (during the checks, the load or the KV pool's setup).
struct StoppedBeforeStart {};

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / double(1ull << 30));
  return buf;
}

int run_engine(const RunArgs& a, RunOutputs& o, const BackendChoice& choice);

// The run itself; run_command maps its errors to a log line.
int run_jobs(const RunArgs& a) {
  // A file-size limit must show up as EFBIG on write (a clear error), not kill the process.
  std::signal(SIGXFSZ, SIG_IGN);
  // SIGINT, SIGTERM and SIGHUP (a closed terminal, `scancel --signal=HUP`) stop the run from
  // here: a signal during the checks or the model's load must not kill the process with its
  // outputs marked "running" and their locks left.
  on_stop_signals(on_signal);
  // The cheap checks first, so a bad flag or output does not wait for a 4 GB checkpoint; the
  // banner after them, so a refused run is one error line.
  const BackendChoice choice = choose_backend(a.engine);
  RunOutputs o;
  try {
    prepare_outputs(a, choice.backend_name(), choice.dtype_name(), o);
  } catch (const Error&) {
    remove_created(o, false);  // the folders it made before a refusal (a lock held, ...)
    throw;
  }
  const bool with_dataset = !o.dataset.dir.empty();
  const BuildInfo& build = build_info();
  log_run_started();
  log_info(cat("version ", build.version, " (commit ", commit_text(), ", ", build.build_type,
               build.cuda ? ", CUDA on" : ", CUDA off", "), host ", host_name(), ", pid ",
               ::getpid()));
  if (!choice.note.empty()) log_info(choice.note);
  log_info(cat("jobs ", a.jobs == "-" ? "stdin" : a.jobs, ", shard ", o.shard.index, "/",
               o.shard.count, " (", o.shard.source, "); results ",
               o.out_path == "-" ? "stdout" : o.out_path,
               o.report_path.empty()  ? ""
               : o.report_path == "-" ? ", report stdout"
                                      : ", report " + o.report_path,
               with_dataset ? ", dataset " + o.dataset.dir : ""));
  // (--overwrite keeps the old output, side file included, until the engine is ready.)
  if (!o.sidecar.empty() && !o.replace_pending) write_sidecar(o.sidecar, o.identity, "running");
  fault_point("started");
  // No run writes the outputs any more: where this run changed nothing (a refusal, or a stop,
  // before its first change), as they were and nothing of its own left; else marked `state`
  // (with the error `why`), not "running".
  auto leave_outputs = [&](const char* state, const std::string& why) {
    if (!o.changed) {
      if (!o.sidecar_before.empty()) write_file_atomic(o.sidecar, o.sidecar_before);
      if (!o.dataset_info_before.empty())
        write_file_atomic(dataset_info_path(o.dataset), o.dataset_info_before);
      remove_created(o);
      return;
    }
    if (std::error_code ec; !o.sidecar.empty() && std::filesystem::exists(o.sidecar, ec))
      write_sidecar(
          o.sidecar, o.identity, state,
          why.empty() ? nlohmann::ordered_json{} : nlohmann::ordered_json{{"error", why}});
    set_dataset_state(o, state, why);
  };
  try {
    return run_engine(a, o, choice);
  } catch (const StoppedBeforeStart&) {
    // Nothing ran (a resume may have cut a torn record already: then "stopped"); --resume
    // continues either way.
    leave_outputs("stopped", "");
    log_info("stopped by a signal before the first job; nothing was run");
    return kExitInterrupted;
  } catch (const std::exception& e) {  // loom::Error, and std::bad_alloc of a huge pool
    // Where the disk lets it: the error that stopped the run is the one to report.
    try {
      leave_outputs("failed", error_text(e));
    } catch (const Error&) {
    }
    throw;
  }
}

// run_jobs past its checks: the model, the engine, the records, the report.
int run_engine(const RunArgs& a, RunOutputs& o, const BackendChoice& choice) {
  const bool with_dataset = !o.dataset.dir.empty();
  if (g_stop.load()) throw StoppedBeforeStart{};  // during the checks
  OpenedModel om = open_model(a.model, a.engine, choice, o.kv, a.quiet);
  fault_point("loaded");
  if (g_stop.load()) throw StoppedBeforeStart{};  // during the load: before anything changes
  RunProvenance prov;
  prov.started_utc = format_utc(process_start_time());
  prov.host = host_name();
  prov.argv = process_argv();
  prov.options = options_json(a);
  prov.options_from_env = a.from_env;
  prov.shard_index = o.shard.index;
  prov.shard_count = o.shard.count;
  prov.shard_source = o.shard.source;
  prov.model_path = a.model;
  prov.architecture = o.model.architecture;
  prov.config_hash = o.model.config_hash;
  describe_backend(om, prov);
  set_run_provenance(provenance_json(prov));
  char load_s[32];
  std::snprintf(load_s, sizeof load_s, "%.2f", om.load_s);
  log_info(cat("model ", a.model, ": ", o.model.architecture, " (", o.model.config_hash,
               "), loaded in ", load_s, " s"));
  log_info(cat(
      "backend ", prov.backend, " on ", prov.device, ", dtype ", prov.weight_dtype, " (weights ",
      prov.weight_dtype, ", KV ", prov.kv_dtype, ")", om.batch_invariant ? ", batch-invariant" : "",
      prov.backend == "cuda" ? cat(", driver CUDA ", prov.driver, ", runtime ", prov.cuda_runtime)
                             : std::string()));

  const ModelSpec& spec = om.model.spec;
  JobDefaults defaults;
  defaults.placeholder_id = a.placeholder_id;
  defaults.overlap = a.overlap;
  defaults.overlap_given = a.overlap_given;
  defaults.overlap_note = a.overlap_note;
  defaults.sampling = a.sampling;
  JobReader reader(a.jobs, spec, defaults);
  reader.set_shard(o.shard.index, o.shard.count);  // other shards' lines are skipped unparsed
  reader.set_stop(&g_stop);  // a signal ends a read inside a line that never ends
  o.model.spec = spec;
  DatasetWriter dataset(o.dataset, o.model, o.reconciled);
  // The outputs open once the engine is ready (its KV pool allocated): a run refused before
  // that leaves what --overwrite would replace as it was.
  std::optional<ResultWriter> writer;
  auto open_outputs = [&] {
    if (g_stop.load()) throw StoppedBeforeStart{};  // --overwrite replaces nothing for no job
    replace_outputs(o, a.quiet);
    writer.emplace(o.out_path, a.resume);
    if (with_dataset && !a.resume) start_dataset(o.dataset, o.model);
    // Again, now with the provenance block (the first write marked the output as running).
    if (!o.sidecar.empty()) write_sidecar(o.sidecar, o.identity, "running");
  };

  EngineOptions opt = engine_options(a.engine, om);
  opt.stop = &g_stop;
  ResumeState& done = o.done;
  if (a.resume)
    opt.keep_sample = [&](const Job& job, uint32_t k) { return !done.skip(job.line, k); };
  JobCounter counter(a.jobs, o.shard.index, o.shard.count);
  Progress progress(counter, a.progress_interval, spec.has_frames() ? spec.image_tokens : 0);
  JobErrorSummary errors;

  // Every record is flushed as it is written; fsync every few seconds bounds what a power
  // loss (not just a crash) can take, without a disk flush per record.
  constexpr double kSyncInterval_s = 5.0;
  double last_sync = now_seconds();
  int64_t ok_written = 0, errors_written = 0;  // this run's records, for the report
  auto write_record = [&](const JobResult& r) {
    o.changed = true;
    ++(r.ok ? ok_written : errors_written);
    writer->write(r);
    fault_point("record");
    if (now_seconds() - last_sync > kSyncInterval_s) {
      writer->sync();
      last_sync = now_seconds();
    }
  };
  // Data before index: with a dataset, ok records wait until their file is durable.
  auto commit_dataset = [&] {
    o.changed = o.changed || !dataset.empty();  // before: a failed commit leaves a data file
    const std::vector<JobResult> committed = dataset.commit();
    for (const JobResult& r : committed) write_record(r);
    writer->sync();
    last_sync = now_seconds();
  };
  opt.on_start = [&](const RunStats& st) {
    open_outputs();
    log_info(cat("KV pool ", gib(double(st.kv_blocks) * double(st.kv_block_bytes)), ": ",
                 st.kv_blocks, " blocks of ", st.block_size, " slots, ", prov.kv_dtype, "; up to ",
                 a.engine.max_seqs, " sequences and ", a.engine.max_batch_slots, " slots a step"));
    progress.start();
  };
  opt.on_progress = [&](const RunStats& st) {
    progress.update(st);
    if (dataset.due(now_seconds())) commit_dataset();
  };

  int64_t failed_earlier = 0;
  auto source = [&](Job& job, JobError& err, bool& ok) {
    while (reader.next(job, err, ok)) {
      // Records of another jobs file are refused (one CLI line, exit 2), not continued.
      if (a.resume)
        done.match_line(ok ? job.line : err.line, ok ? job.id : err.id,
                        ok ? job.line_hash : err.line_hash);
      if (!(a.resume && !ok && done.failed(err.line))) return true;  // else: its record is written
      counter.forget(err.line);  // failed in an earlier run: nothing left to do for it
      ++failed_earlier;
    }
    return false;
  };
  auto sink = [&](const JobResult& r) {
    if (!r.ok) {
      errors.add(r.error);
      counter.forget(r.line);
    }
    if (!with_dataset || !r.ok) return write_record(r);
    retire_merged_index(o, a.quiet);
    JobResult kept = r;
    kept.include_tokens = !a.no_tokens_in_results;
    dataset.add(kept, now_seconds());
    if (dataset.due(now_seconds())) commit_dataset();
  };
  opt.input_ready = [&] { return reader.ready(); };
  opt.input_paused = [&] { return reader.paused(); };
  Engine engine(spec, *om.backend, opt);
  RunContext ctx;
  ctx.started = std::chrono::system_clock::now();
  RunStats st = engine.run(source, sink);
  st.jobs_read += failed_earlier;  // read, and answered by their earlier error records
  st.jobs_failed_earlier = failed_earlier;
  commit_dataset();
  const int64_t cut = reader.cut_last_line();
  if (cut > 0)
    log_warning(cat("line ", cut, " of ", a.jobs,
                    ", the last, has no newline and is no valid job (still being written?): it "
                    "was not run and has no record; rerun with --resume once it is whole"));
  if (a.resume && !st.stopped) done.check_all_matched(a.jobs);
  ctx.ended = std::chrono::system_clock::now();
  progress.finish(st);

  ctx.model_dir = a.model;
  ctx.jobs_path = a.jobs;
  ctx.out_path = o.out_path;
  ctx.backend = om.backend_name;
  ctx.dtype = om.dtype_name;
  ctx.kv_dtype = om.kv_dtype;
  ctx.kv_scales = om.kv_scales_source;
  ctx.batch_invariant = om.batch_invariant;
  ctx.load_s = om.load_s;
  ctx.step_bytes = om.step_bytes();
  ctx.device = om.backend->device_info();
  ctx.shard_index = o.shard.index;
  ctx.shard_count = o.shard.count;
  // What a finished shard read of the jobs, every shard's lines: its siblings must agree (a
  // shared pipe or lines appended between the shards' runs give each other jobs).
  nlohmann::ordered_json jobs_read;
  if (!st.stopped)
    jobs_read["jobs_read"] = {{"lines", reader.records_read()},
                              {"hash", "fnv1a64:" + hex64(reader.lines_hash())}};
  if (!o.report_path.empty()) {
    nlohmann::json rep = run_report(st, ctx);
    if (!jobs_read.empty()) rep["jobs_read"] = jobs_read["jobs_read"];
    // What changes tokens (dataset.json's run_identity): merge --reports compares the shards'.
    rep["run_identity"] = o.model.identity;
    if (cut > 0) rep["jobs_summary"]["last_line_unrun"] = cut;  // why the exit is 1
    if (with_dataset) rep["dataset"] = o.dataset.dir;
    if (o.out_path != "-") rep["results"] = same_path_form(o.out_path).string();
    if (o.out_path != "-" && o.report_path != "-")  // still true when both files move together
      rep["results_relative"] = relative_to(o.out_path, parent_dir(o.report_path));
    // The whole results file, earlier runs' records included (generated.* is this run's work;
    // after a --resume of a finished run it is 0).
    rep["records"] = {{"ok", done.ok_records + ok_written},
                      {"error", done.error_records + errors_written},
                      {"this_run", ok_written + errors_written}};
    rep["provenance"] = run_provenance();
    const std::string text = rep.dump(2) + "\n";
    if (o.report_path == "-") {
      std::fputs(text.c_str(), stdout);
    } else {
      write_file_atomic(o.report_path, text);
    }
  }
  const char* state = st.stopped ? "stopped" : "complete";
  if (with_dataset) dataset.finish(state, jobs_read);
  if (!o.sidecar.empty()) write_sidecar(o.sidecar, o.identity, state, jobs_read);
  for (const std::string& line : run_summary(st, ctx)) log_info(line);
  // The reasons, not only the count: a failed run's first errors, grouped by kind.
  for (const std::string& line : errors.lines(st.jobs_read)) log_warning(line);
  log_info(cat("results in ", o.out_path == "-" ? "stdout" : o.out_path,
               o.report_path.empty()
                   ? ""
                   : ", report in " + (o.report_path == "-" ? "stdout" : o.report_path)));
  // Jobs that failed in an earlier run are not retried (bad input fails again), but their
  // error records are this output's too: a resubmitted script must not read it as clean.
  const int64_t failed_before = a.resume ? o.done.error_records : 0;
  if (failed_before > 0)
    log_warning(cat("resume: ", failed_before, failed_before == 1 ? " job" : " jobs",
                    " failed in an earlier run of ", o.out_path,
                    " (their error records are kept; bad input is not retried)"));
  if (st.stopped) return kExitInterrupted;
  return st.jobs_failed + failed_before > 0 || cut > 0 ? kExitJobsFailed : kExitOk;
}

}  // namespace

std::string error_text(const std::exception& e) {
  return dynamic_cast<const std::bad_alloc*>(&e) ? kOutOfHostMemory : e.what();
}

int run_command(const RunArgs& a) {
  log_init(a.log_format, a.quiet);
  // The run's own errors go through its log, so once it has started they take its form (a
  // json line with --log-format json, the time at the end in a log file).
  try {
    return run_jobs(a);
  } catch (const std::exception& e) {  // loom::Error, std::bad_alloc: in the run's log format
    log_error(error_text(e));
    return kExitFatal;
  }
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
    LOOM_CHECK(!m.allow_partial && !m.no_lock,
               "merge --reports: ", m.allow_partial ? "--allow-partial" : "--no-lock",
               " applies to merging results files or --dataset; a merged report needs every "
               "shard's report");
    return merge_reports_command(m.reports, m.out, m.overwrite);
  }
  if (!m.dataset.empty()) {
    LOOM_CHECK(m.out.empty() && m.jobs.empty() && !m.overwrite,
               "merge --dataset DIR writes DIR/manifest.jsonl "
               "and DIR/dataset.json; expected no --out, --jobs or --overwrite with it");
    const DatasetMerge d = merge_dataset(m.dataset, m.allow_partial, m.no_lock);
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
  check_file_output("merge: ", "--out", m.out, m.overwrite);
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
