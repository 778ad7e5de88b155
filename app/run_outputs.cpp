// prepare_outputs (run_outputs.h). Order matters: every check that can refuse the run comes
// before the first folder or file is created, and the locks are taken before anything that
// reads or rewrites an existing output.
#include "app/run_outputs.h"

#include <simdjson.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>

#include "app/log.h"
#include "app/setup.h"
#include "core/error.h"
#include "core/fault.h"
#include "core/philox.h"
#include "io/kv_scales.h"
#include "io/sidecar.h"
#include "model/fingerprint.h"

namespace loom {
namespace fs = std::filesystem;

namespace {

// One of the run's paths, with the form two spellings of one file share.
struct RunPath {
  std::string what;  // "--out", "--out's side file", ...
  std::string path;
  fs::path real;  // same_path_form(path)
};

// Whether `a` is `b` or lies below it, component by component.
bool within(const fs::path& a, const fs::path& b) {
  return std::mismatch(b.begin(), b.end(), a.begin(), a.end()).first == b.end();
}

// Refuses, before anything is created, two of the run's paths that are one file however they
// are spelled (./x, a/../x, a symlinked folder, a hard link): --report onto --out or its side
// or lock file, an output onto an input (--jobs, the model's files, --kv-scales); and an output
// that is --tokens-out, holds it, or takes a name the dataset writes there.
void check_paths_distinct(const RunArgs& a, const RunOutputs& o, const ModelIdentity& mid,
                          bool report_file) {
  std::vector<RunPath> files;
  auto add = [&](const std::string& what, const std::string& path) {
    files.push_back({what, path, same_path_form(path)});
  };
  std::vector<std::string> reads;  // what loom would overwrite, for each input
  auto add_input = [&](const std::string& what, const std::string& path, const char* read) {
    add(what, path);
    reads.push_back(read);
  };
  if (a.jobs != "-") add_input("--jobs", a.jobs, "the jobs it reads");
  for (const std::string& f : mid.files) add_input("a file of --model", f, "the model it reads");
  if (!a.engine.kv_scales.empty()) add_input("--kv-scales", a.engine.kv_scales, "its KV scales");
  const size_t inputs = files.size();  // files[0, inputs) are read, the rest written
  if (o.out_path != "-") {
    add("--out", o.out_path);
    add("--out's side file", o.sidecar);
    add("--out's lock file", o.out_path + ".lock");
  }
  if (report_file) {
    add("--report", o.report_path);
    add("--report's lock file", o.report_path + ".lock");
  }
  for (size_t j = inputs; j < files.size(); ++j) {
    for (size_t i = 0; i < j; ++i) {
      if (!same_path(files[i].path, files[j].path)) continue;
      fail(files[j].what, " ", files[j].path, " is the same file as ", files[i].what, " ",
           files[i].path,
           i < inputs ? "; loom would overwrite " + reads[i] : "; one would overwrite the other",
           ": expected different paths");
    }
  }
  if (o.dataset.dir.empty()) return;
  const fs::path dir = same_path_form(o.dataset.dir);
  for (const RunPath& f : files) {
    LOOM_CHECK(!within(dir, f.real), "--tokens-out ", o.dataset.dir, " is or lies inside ", f.what,
               " ", f.path, ": expected a folder of its own");
    LOOM_CHECK(
        !(f.real.parent_path() == dir && dataset_owned_name(f.real.filename().string())), f.what,
        " ", f.path, " takes a name the dataset writes in --tokens-out ", o.dataset.dir,
        " (data-N.safetensors, manifest.jsonl, dataset.json, SHA256SUMS and their shard forms): "
        "expected another name or folder");
  }
}

// Whether `path` is the dataset.json that `loom merge --dataset` wrote.
bool is_merged_index(const std::string& path) {
  std::ifstream in(path);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  return j.is_object() && j.contains("shard") && j["shard"].is_object() &&
         j["shard"].contains("merged_from");
}

// Whether the run report at `path` reports on `out`: by its "results" (same_path_form of its
// --out), or, in a report of a loom that did not write it, by its "out" as typed: the same
// file from this folder, or (typed relative to a folder unknown now) the last components of
// `out`'s. `of` says what it reports on ("" when it is no run report).
bool report_of(const std::string& path, const std::string& out, std::string& of) {
  std::ifstream in(path);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  of.clear();
  if (!j.is_object() || !j.contains("generated") || !j.contains("out") || !j["out"].is_string())
    return false;
  if (j.contains("results") && j["results"].is_string()) {
    of = j["results"];
    // Where a report says so, the results at the same place relative to it (it and they
    // moved or were copied together; a report moved alone is another's).
    if (j.contains("results_relative") && j["results_relative"].is_string())
      return j["results_relative"] == relative_to(out, parent_dir(path));
    return of == same_path_form(out).string();
  }
  const fs::path typed = fs::path(j["out"].get<std::string>()).lexically_normal();
  of = typed.string();
  if (same_path(typed.string(), out)) return true;
  if (!typed.is_relative()) return false;
  const fs::path ours = same_path_form(out);
  const auto n = std::distance(typed.begin(), typed.end());
  return std::distance(ours.begin(), ours.end()) >= n &&
         std::equal(typed.begin(), typed.end(), std::prev(ours.end(), n));
}

// The bytes of `path`; "" when it cannot be read.
std::string slurp_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Whether this shard of the dataset folder already holds anything.
bool dataset_has_shard(const DatasetOptions& d) {
  std::error_code ec;
  return fs::exists(dataset_manifest_path(d), ec) || !dataset_files(d).empty();
}

// Whether the results file `owner` has moved on from dataset folder `dir`: its side file names
// another --tokens-out, or none (it was replaced by an --overwrite that wrote elsewhere), so the
// samples in `dir` have no records left to keep.
bool owner_left(const std::string& owner, const std::string& dir) {
  nlohmann::json side;
  try {
    side = read_sidecar(sidecar_path(owner));
  } catch (const Error&) {
    return false;
  }
  if (side.is_null()) return false;
  const nlohmann::json here = {{"schema", side.value("schema", 1)},
                               {"identity", {{"tokens_out", same_path_form(dir).string()}}},
                               {"results", same_path_form(owner).string()}};
  return !identity_agrees(side, here, "tokens_out");
}

// --overwrite of an --out written with a --tokens-out that this run does not write (another,
// or none): that dataset's shard would go on naming records that are gone, and verify and
// merge --dataset would call it whole. Refused unless the shard is no longer that file's.
void check_old_dataset_replaced(const RunOutputs& o) {
  nlohmann::json side;
  try {
    side = read_sidecar(o.sidecar);
  } catch (const Error&) {
    return;  // no side file, or an unreadable one: check_sidecar's business on --resume
  }
  if (!side.is_object() || !side.contains("identity") || !side["identity"].is_object()) return;
  const nlohmann::json& old = side["identity"].value("tokens_out", nlohmann::json());
  if (!old.is_string() || old.get<std::string>().empty()) return;
  DatasetOptions d = o.dataset;
  d.dir = old.get<std::string>();
  d.shard_index = o.shard.index;
  d.shard_count = o.shard.count;
  if (!o.dataset.dir.empty() && same_path(d.dir, o.dataset.dir)) return;
  std::error_code ec;
  LOOM_CHECK(!fs::exists(dataset_info_path(d), ec) ||
                 dataset_results_path(d) != same_path_form(o.out_path).string(),
             "--overwrite: --out ", o.out_path, " was written with --tokens-out ", d.dir,
             ", whose shard ", d.shard_index, "/", d.shard_count, " (", dataset_info_path(d),
             ") names its records; replacing them ",
             o.dataset.dir.empty() ? std::string("without a dataset")
                                   : "with --tokens-out " + o.dataset.dir,
             " would leave that dataset naming records that are gone: pass --tokens-out ", d.dir,
             " to replace it too, or remove its shard's files first");
}

// The other shards of this run's folder are of its model (verify and merge --dataset refuse
// two): a shard of another model is refused before it writes there.
void check_sibling_shards(const RunOutputs& o) {
  if (o.dataset.dir.empty() || o.shard.count <= 1) return;
  const std::string own = fs::path(dataset_info_path(o.dataset)).filename().string();
  const nlohmann::json::json_pointer hash("/model/config_hash");
  std::error_code ec;
  for (const auto& de : fs::directory_iterator(o.dataset.dir, ec)) {
    const std::string name = de.path().filename().string();
    if (name.rfind("dataset.shard-", 0) != 0 || name == own) continue;
    std::ifstream in(de.path());
    const nlohmann::json info = nlohmann::json::parse(in, nullptr, false);
    LOOM_CHECK(!info.is_object() || !info.contains(hash) || info[hash] == o.model.config_hash,
               "--tokens-out ", o.dataset.dir, " holds ", name, " of model ",
               info.value("/model/name"_json_pointer, std::string("?")), " (", info[hash].dump(),
               "), this run's model is ", o.model.name, " (", o.model.config_hash,
               "): the shards of one folder are one run; expected its model, or a new folder");
  }
}

}  // namespace

void prepare_outputs(const RunArgs& a, const std::string& backend, const std::string& dtype,
                     RunOutputs& o) {
  // 0. Paths are recorded in JSON (side file, report, dataset.json): UTF-8 only, said up front
  // (a byte that is not stopped the run at its first record, with the JSON library's words).
  for (const auto& [option, path] : {std::pair<const char*, const std::string&>{"--model", a.model},
                                     {"--jobs", a.jobs},
                                     {"--out", a.out},
                                     {"--report", a.report},
                                     {"--tokens-out", a.tokens_out},
                                     {"--kv-scales", a.engine.kv_scales},
                                     {"--model-table", a.engine.model_table}})
    LOOM_CHECK(simdjson::validate_utf8(path.data(), path.size()), option, " ", path,
               ": the path is not valid UTF-8; loom records its paths in JSON: rename it");
  // 1. Arguments that contradict each other.
  LOOM_CHECK(!(a.resume && a.overwrite),
             "--resume and --overwrite contradict each other: "
             "expected one of them (continue the results, or replace them)");
  LOOM_CHECK(!a.no_tokens_in_results || !a.tokens_out.empty(),
             "--no-tokens-in-results needs --tokens-out DIR: without it the tokens would be "
             "written nowhere");
  o.shard = resolve_shard(a.shard);
  if (a.shard.empty() || (a.shard == "auto" && o.shard.count == 1)) {
    const std::string w = unrequested_shard_warning(nullptr, a.shard);
    if (!w.empty()) log_warning(w);  // even with -q
  }
  check_untagged("--out", a.out, o.shard);
  if (!a.report.empty()) check_untagged("--report", a.report, o.shard);
  o.out_path = shard_path(a.out, o.shard);
  // An --out that is a symlink is written, locked and given its side file at its target, so a
  // run's files are the same whichever name reaches them.
  std::error_code link_ec;
  if (o.out_path != "-" && fs::is_symlink(o.out_path, link_ec)) {
    const fs::path target = fs::read_symlink(o.out_path, link_ec);
    if (!link_ec)
      o.out_path = same_path_form(
          (target.is_absolute() ? target : fs::path(o.out_path).parent_path() / target).string());
  }
  o.report_path = a.report.empty() ? "" : shard_path(a.report, o.shard);
  const bool to_stdout = o.out_path == "-";
  // "--report -" is stdout: nothing to probe, create or lock, and no room for the records too.
  const bool report_file = !o.report_path.empty() && o.report_path != "-";
  LOOM_CHECK(!(a.resume && to_stdout), "--resume needs --out to be a file, not stdout");
  LOOM_CHECK(!(to_stdout && o.report_path == "-"),
             "--report - and --out - both write to stdout; expected a file for one of them");
  o.sidecar = to_stdout ? "" : sidecar_path(o.out_path);
  if (!a.tokens_out.empty()) {
    o.dataset.dir = a.tokens_out;
    o.dataset.shard_index = o.shard.index;
    o.dataset.shard_count = o.shard.count;
    o.dataset.samples_per_file = a.samples_per_file;
    o.dataset.file_seconds = a.file_seconds;
    o.dataset.actions = !a.no_dataset_actions;
    o.dataset.context = !a.no_dataset_context;
    o.dataset.results = to_stdout ? "-" : same_path_form(o.out_path).string();
  }
  // The model's identity (headers only): its files are inputs no output may be.
  const ModelIdentity mid = model_identity(a.model, a.engine.model_table);
  check_paths_distinct(a, o, mid, report_file);
  if (a.jobs != "-") {  // read later, after the model loads: say now that it cannot be
    std::error_code ec;
    const fs::file_status st = fs::status(a.jobs, ec);
    LOOM_CHECK(fs::exists(st), "cannot read jobs from ", a.jobs,
               ": no such file; expected a JSONL jobs file, or - for stdin");
    LOOM_CHECK(!fs::is_directory(st), "cannot read jobs from ", a.jobs,
               ": it is a folder; expected a JSONL jobs file, or - for stdin");
    LOOM_CHECK(::access(a.jobs.c_str(), R_OK) == 0, "cannot read jobs from ", a.jobs, ": ",
               std::strerror(errno));
  }

  // 2. Every output can be written, and none is a finished one we would replace by accident.
  const bool keep_or_replace = a.resume || a.overwrite;
  if (!to_stdout) {
    const std::string owned = loom_owned(o.out_path);  // its own results, once: resumed
    LOOM_CHECK(owned.empty() || owned.rfind("a loom run's results file", 0) == 0, "--out ",
               o.out_path, " is ", owned, "; choose another --out");
    probe_output("--out", o.out_path, false);
    LOOM_CHECK(keep_or_replace || !nonempty_file(o.out_path), "--out ", o.out_path,
               " already holds results; pass --resume to continue it, --overwrite to replace "
               "it, or choose a new --out");
  }
  if (report_file) {
    LOOM_CHECK(o.report_path != o.out_path, "--report and --out are the same file (", o.report_path,
               "); expected two different paths");
    probe_output("--report", o.report_path, false);
    LOOM_CHECK(keep_or_replace || !nonempty_file(o.report_path), "--report ", o.report_path,
               " already exists; pass --resume or --overwrite to replace it, or choose a new "
               "--report");
    std::string owned = run_owned(o.report_path);
    if (owned.empty()) owned = dataset_owned(o.report_path);
    LOOM_CHECK(owned.empty(), "--report ", o.report_path, " is ", owned,
               "; choose another --report");
    std::string of;
    LOOM_CHECK(
        !a.resume || !nonempty_file(o.report_path) || report_of(o.report_path, o.out_path, of),
        "--report ", o.report_path,
        of.empty() ? std::string(" is not a loom run report")
                   : " is the report of the results file " + of,
        "; --resume replaces only the report of its own --out (", o.out_path,
        "): choose a new --report");
  }
  if (!o.dataset.dir.empty()) {
    probe_output("--tokens-out", o.dataset.dir, true);
    if (o.shard.count > 1) {  // one folder, one layout: no unsharded index, no other count
      std::error_code ec;
      const std::string whole = o.dataset.dir + "/dataset.json";
      LOOM_CHECK(!fs::exists(whole, ec) || is_merged_index(whole), "--tokens-out ", o.dataset.dir,
                 " holds the dataset of an unsharded run (", whole, "); a shard of ", o.shard.count,
                 " would mix into it: expected a new folder");
      for (const auto& de : fs::directory_iterator(o.dataset.dir, ec)) {
        int k = 0, n = 0;
        const std::string name = de.path().filename().string();
        LOOM_CHECK(std::sscanf(name.c_str(), "dataset.shard-%d-of-%d.json", &k, &n) != 2 ||
                       n == o.shard.count,
                   "--tokens-out ", o.dataset.dir, " holds shards of ", n, " (", name,
                   "), this run is a shard of ", o.shard.count,
                   ": expected the same --shard count as that run, or a new folder");
      }
    }
    LOOM_CHECK(o.shard.count > 1 || !is_merged_index(dataset_info_path(o.dataset)), "--tokens-out ",
               o.dataset.dir, " holds the merged index of a sharded run (",
               dataset_info_path(o.dataset),
               "); an unsharded run would replace it: expected "
               "the same --shard as that run, or a new folder");
    LOOM_CHECK(
        keep_or_replace || !dataset_has_shard(o.dataset), "--tokens-out ", o.dataset.dir,
        " already holds a dataset for shard ", o.shard.index, "/", o.shard.count, " (",
        dataset_manifest_path(o.dataset),
        "); pass --resume to continue it, --overwrite to replace it, or choose a new folder");
    // --resume rolls back the files whose samples --out lacks, --overwrite removes them: only
    // with their own results (or, to --overwrite, results that are gone or now of another
    // folder).
    const std::string owner = dataset_results_path(o.dataset);
    std::error_code ec;
    if (!owner.empty() && owner != o.dataset.results && (a.resume || a.overwrite)) {
      const bool orphaned = !fs::exists(owner, ec) || owner_left(owner, o.dataset.dir);
      LOOM_CHECK(a.overwrite && orphaned, "--tokens-out ", o.dataset.dir, " shard ", o.shard.index,
                 "/", o.shard.count, " holds the samples of the results file ", owner, " (",
                 dataset_info_path(o.dataset), "), not of --out ", o.out_path, "; ",
                 orphaned   ? "that file's records are gone (replaced, or of another "
                              "--tokens-out), so --resume cannot continue them: pass --overwrite "
                              "to start the folder over, or choose a new folder"
                 : a.resume ? "--resume would roll its files back: expected --out " + owner +
                                  ", or a new folder"
                            : "--overwrite would remove them under its records: expected --out " +
                                  owner + ", or a new folder");
    }
    // A run writes its side file before any data: data files without it have their records
    // elsewhere, and --resume would roll every one back.
    LOOM_CHECK(!a.resume || fs::exists(o.sidecar, ec) || nonempty_file(o.out_path) ||
                   dataset_files(o.dataset).empty(),
               "--resume: --out ", o.out_path, " and its side file are missing, but --tokens-out ",
               o.dataset.dir, " shard ", o.shard.index, "/", o.shard.count, " holds ",
               dataset_files(o.dataset).size(),
               " data files, which resuming would roll back: restore the results file that "
               "names them (and its side file), or pass --overwrite to start over");
  }

  // 3. The model's identity and the options that change tokens.
  o.model.architecture = mid.architecture;
  o.model.config_hash = mid.fingerprint;
  o.model.name = mid.architecture + ":" + a.model;
  o.model.spec = mid.spec;
  check_sibling_shards(o);
  o.identity = {{"model_fingerprint", mid.fingerprint},
                {"weights_sample", mid.weights_sample},
                {"architecture", mid.architecture},
                {"backend", backend},
                {"dtype", dtype},
                {"batch_invariant", a.engine.batch_invariant},
                {"placeholder_id", a.placeholder_id},
                {"overlap", a.overlap},
                {"shard", cat(o.shard.index, "/", o.shard.count)},
                {"tokens_out", a.tokens_out.empty() ? "" : same_path_form(a.tokens_out).string()},
                {"tokens_in_results", !a.no_tokens_in_results},
                {"draw_stream", kDrawStream}};
  // Options that change tokens or the dataset's form, each only when not at its default, so
  // results of a loom that did not record them resume as before when they were not given.
  const SamplingParams defaults;
  const SamplingParams& sp = a.sampling;
  if (sp.seed != defaults.seed) o.identity["seed"] = sp.seed;
  if (sp.temperature != defaults.temperature) o.identity["temperature"] = sp.temperature;
  if (sp.top_k != defaults.top_k) o.identity["top_k"] = sp.top_k;
  if (sp.top_p != defaults.top_p) o.identity["top_p"] = sp.top_p;
  if (!o.dataset.dir.empty() && !o.dataset.actions) o.identity["dataset_actions"] = false;
  if (!o.dataset.dir.empty() && !o.dataset.context) o.identity["dataset_context"] = false;
  // The KV format, --kv-scales read here and only here (the run uses o.kv): the scales the
  // identity records are the ones the run uses, and a FIFO or `<(...)` is read once. Before
  // the checks below that need no weights, so a bad file is refused before anything is made.
  LOOM_CHECK(!(backend == "cpu" && a.engine.kv_dtype == "bf16"),
             "--kv-dtype bf16: the cpu backend computes in f32; its KV cache is f32 or fp8");
  kv_format(a.engine, mid.spec, o.kv);
  // An FP8 KV cache changes tokens: its scales are part of the identity (absent otherwise,
  // so runs without one resume as before).
  if (o.kv.kv_dtype == KvDType::FP8) {
    const nlohmann::ordered_json sj =
        kv_scales_json(o.kv.kv_scales.empty() ? KvScales::ones(mid.spec.layers, mid.spec.kv_heads)
                                              : o.kv.kv_scales,
                       nlohmann::ordered_json::object());
    o.identity["kv_dtype"] = "fp8";
    o.identity["kv_scales"] = {{"k", sj["k"]}, {"v", sj["v"]}};
  }
  // A bf16 cache under f32 arithmetic changes tokens too (absent where the cache takes the
  // compute dtype, as before).
  if (o.kv.kv_dtype == KvDType::BF16 && dtype != "bf16") o.identity["kv_dtype"] = "bf16";
  // The dataset's shards carry what their run's tokens depend on, as the side files do: merge
  // --dataset and verify compare them (a shard with another --seed is another run).
  o.model.identity = o.identity;
  for (const char* own : {"shard", "tokens_out"}) o.model.identity.erase(own);

  // 3b. What needs the model's spec but no weights: said before anything is created.
  JobDefaults overlap;
  overlap.overlap = a.overlap;
  overlap.overlap_given = a.overlap_given;
  overlap.overlap_note = a.overlap_note;
  check_job_defaults(mid.spec, overlap);

  // 4. Only now create folders, then take the locks (a second writer fails here, at once).
  // What did not exist goes again if the run fails before its first change (run.cpp).
  auto note_new = [&](const fs::path& p, bool is_dir) {
    std::error_code ec;
    std::vector<std::string> missing;
    for (fs::path d = is_dir ? p : p.parent_path(); !d.empty() && !fs::exists(d, ec);
         d = d.parent_path())
      missing.push_back(d.string());
    o.created.insert(o.created.end(), missing.begin(), missing.end());  // deepest first
    if (!is_dir && !fs::exists(p, ec)) o.created.insert(o.created.begin(), p.string());
  };
  if (!to_stdout) {
    note_new(o.out_path, false);
    note_new(o.sidecar, false);
  }
  if (report_file) note_new(o.report_path, false);
  if (!o.dataset.dir.empty()) {
    for (const std::string& p : {dataset_info_path(o.dataset), dataset_manifest_path(o.dataset),
                                 dataset_sums_path(o.dataset)})
      note_new(p, false);
    note_new(o.dataset.dir, true);
  }
  if (!to_stdout) create_parent_dirs("--out", o.out_path, false);
  if (report_file) create_parent_dirs("--report", o.report_path, false);
  if (!o.dataset.dir.empty()) create_parent_dirs("--tokens-out", o.dataset.dir, true);
  if (!to_stdout) o.out_lock = OutputLock(o.out_path + ".lock", "--out " + o.out_path, a.no_lock);
  if (report_file)  // also catches another run whose --out this --report names
    o.report_lock = OutputLock(o.report_path + ".lock", "--report " + o.report_path, a.no_lock);
  if (!o.dataset.dir.empty()) {
    o.dataset_lock = OutputLock(
        dataset_lock_path(o.dataset),
        cat("--tokens-out ", o.dataset.dir, " shard ", o.shard.index, "/", o.shard.count),
        a.no_lock);
  }

  // 5. Continue (same identity, torn tail cut, dataset reconciled) or start clean.
  if (a.resume) {
    check_sidecar(o.sidecar, o.out_path, o.identity,
                  o.kv.kv_dtype == KvDType::Auto ? dtype : kv_dtype_name(o.kv.kv_dtype));
    LOOM_CHECK(sidecar_state(o.sidecar) != "replacing", "--resume: the --overwrite of ", o.out_path,
               " was stopped while it removed the old output (", o.sidecar,
               " says \"replacing\"): run it again with --overwrite to finish it");
    o.sidecar_before = slurp_file(o.sidecar);
    if (!o.dataset.dir.empty()) o.dataset_info_before = slurp_file(dataset_info_path(o.dataset));
    o.done = scan_results(o.out_path);
    o.changed = o.done.dropped_bytes > 0;
    if (!a.quiet && o.done.dropped_bytes > 0)
      log_info(cat("resume: cut a torn last line (line ", o.done.dropped_line, ", ",
                   o.done.dropped_bytes, " bytes) from ", o.out_path));
    if (!o.dataset.dir.empty()) {
      o.reconciled = reconcile_dataset(o.dataset, o.model, o.out_path);
      const DatasetReconcile& r = o.reconciled;
      if (r.records_dropped > 0) o.done = scan_results(o.out_path);  // the rewritten file
      o.changed = o.changed || r.files_removed > 0 || r.records_dropped > 0;
      if (r.files_removed > 0) retire_merged_index(o, a.quiet);
      if (!r.unsummed.empty())
        log_warning(cat("resume: ", dataset_sums_path(o.dataset), " had no line for ", r.unsummed,
                        " (lost or edited): it is hashed as it is now, so a change "
                        "made to it before is no longer seen by loom verify"));
      if (!a.quiet && (r.files_removed > 0 || r.records_dropped > 0 || r.temp_removed > 0))
        log_info(cat("resume: dataset ", o.dataset.dir, ": kept ", r.files_kept, " files (",
                     r.samples_kept, " samples); rolled back ", r.files_removed, " files and ",
                     r.records_dropped, " records, removed ", r.temp_removed, " temporary files (",
                     r.first_problem, ")"));
    }
  } else if (a.overwrite) {
    check_old_dataset_replaced(o);
    // Replaced only once the engine is ready (replace_outputs): a refusal before that leaves
    // the old output, side file and dataset as they were.
    o.replace_pending = true;
    if (!o.sidecar.empty()) o.sidecar_before = slurp_file(o.sidecar);
    if (!o.dataset.dir.empty()) o.dataset_info_before = slurp_file(dataset_info_path(o.dataset));
  }
}

void replace_outputs(RunOutputs& o, bool quiet) {
  if (!o.replace_pending) return;
  o.replace_pending = false;
  o.changed = true;
  std::error_code ec;
  if (!o.sidecar.empty() && fs::exists(o.sidecar, ec))
    write_sidecar(o.sidecar, o.identity, "replacing");
  // The dataset's index too, so that merge and verify stop trusting it before a file goes.
  if (!o.dataset_info_before.empty()) set_dataset_state(o, "replacing");
  fault_point("replacing");
  if (o.out_path != "-") {
    fs::remove(o.out_path, ec);
    LOOM_CHECK(!ec, "--overwrite: cannot remove ", o.out_path, ": ", ec.message());
  }
  if (!o.dataset.dir.empty()) {
    retire_merged_index(o, quiet);  // before the files it lists
    remove_dataset_shard(o.dataset);
  }
}

void set_dataset_state(const RunOutputs& o, const std::string& state, const std::string& error) {
  if (o.dataset.dir.empty()) return;
  std::ifstream in(dataset_info_path(o.dataset));
  nlohmann::json info = nlohmann::json::parse(in, nullptr, false);
  if (!info.is_object()) return;
  info["state"] = state;
  if (!error.empty()) info["error"] = error;
  write_file_atomic(dataset_info_path(o.dataset), info.dump(2) + "\n");
}

void remove_created(RunOutputs& o, bool files) {
  // Files while the locks are held (a run waiting for them must not find its own outputs
  // removed afterwards), then the locks, then the folders they leave empty.
  std::error_code ec;
  for (const std::string& p : o.created)
    if (files && !fs::is_directory(p, ec)) fs::remove(p, ec);
  o.out_lock = OutputLock();
  o.report_lock = OutputLock();
  o.dataset_lock = OutputLock();
  for (const std::string& p : o.created)
    if (fs::is_directory(p, ec) && fs::is_empty(p, ec)) fs::remove(p, ec);
}

void retire_merged_index(RunOutputs& o, bool quiet) {
  if (o.index_retired || o.dataset.dir.empty() || o.shard.count <= 1) return;
  o.index_retired = true;
  const std::string merged_index = o.dataset.dir + "/dataset.json";
  if (!is_merged_index(merged_index)) return;
  std::error_code ec;
  for (const std::string& p : {merged_index, o.dataset.dir + "/manifest.jsonl"}) {
    fs::remove(p, ec);
    LOOM_CHECK(!ec, "cannot remove the merged index ", p, " (stale once shard ", o.shard.index, "/",
               o.shard.count, " writes): ", ec.message());
  }
  sync_dir(o.dataset.dir);
  if (!quiet)
    log_info(cat("removed ", o.dataset.dir, "'s merged index (dataset.json, manifest.jsonl): ",
                 "shard ", o.shard.index, "/", o.shard.count,
                 " writes there now; run loom merge --dataset again when the shards are done"));
}

}  // namespace loom
