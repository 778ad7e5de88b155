#include "app/cli_options.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>

#include "app/cli_suggest.h"
#include "app/log.h"
#include "app/progress.h"
#include "app/setup.h"
#include "core/error.h"
#include "core/sampling_params.h"

namespace loom {
namespace {

constexpr int64_t kIntMax = std::numeric_limits<int>::max();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr double kInf = std::numeric_limits<double>::infinity();

std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// ---- Validators: "" or what was expected, in words ------------------------------------------

// An integer in [lo, hi]; the upper end of the type is left unsaid unless the value passed it.
CLI::Validator integer_in(int64_t lo, int64_t hi = kIntMax) {
  return CLI::Validator(
      [lo, hi](std::string& s) -> std::string {
        errno = 0;
        char* end = nullptr;
        const long long v = std::strtoll(s.c_str(), &end, 10);
        const bool whole = !s.empty() && *end == '\0' && errno != ERANGE;
        if (whole && v >= lo && v <= hi) return "";
        const bool type_max = hi == kIntMax || hi == kInt64Max;
        if (type_max && lo == std::numeric_limits<int>::min()) return "expected an integer";
        const bool too_large = (whole && v > hi) || (errno == ERANGE && v > 0);
        if (type_max && !too_large) return cat("expected an integer >= ", lo);
        return cat("expected an integer in [", lo, ", ", hi, "]");
      },
      "");
}

// A finite number in the interval lo..hi; open ends exclude the bound, hi = kInf for none.
CLI::Validator number_in(double lo, bool lo_open, double hi = kInf, bool hi_open = true) {
  return CLI::Validator(
      [=](std::string& s) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        const bool ok = !s.empty() && *end == '\0' && std::isfinite(v) &&
                        (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
        if (ok) return "";
        if (hi == kInf) return cat("expected a number ", lo_open ? "> " : ">= ", number_text(lo));
        return cat("expected a number in ", lo_open ? "(" : "[", number_text(lo), ", ",
                   number_text(hi), hi_open ? ")" : "]");
      },
      "");
}

// A default temperature: as a job's "sampling.temperature", 0 (greedy) or [1e-05, FLT_MAX]
// (below, logit / T overflows fp32; above, the float is inf).
CLI::Validator temperature_value() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        const bool ok = !s.empty() && *end == '\0' &&
                        (v == 0 || (v >= double(kMinTemperature) &&
                                    v <= double(std::numeric_limits<float>::max())));
        return ok ? ""
                  : cat("expected 0 (greedy) or a number in [1e-05, ",
                        std::numeric_limits<float>::max(), "]");
      },
      "");
}

// A sampling seed: as a job's "sampling.seed", any integer in [0, 2^64).
CLI::Validator seed_value() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        errno = 0;
        char* end = nullptr;
        std::strtoull(s.c_str(), &end, 10);
        const bool ok =
            !s.empty() && std::isdigit((unsigned char)s[0]) && *end == '\0' && errno != ERANGE;
        return ok ? "" : "expected an integer in [0, 2^64)";
      },
      "");
}

// One of `names`; an alias is rewritten to the name it stands for before the value is stored
// (only through Option::transform: Option::check hands a validator a copy).
CLI::Validator one_of(std::vector<std::string> names,
                      std::map<std::string, std::string> aliases = {}) {
  return CLI::Validator(
      [names, aliases](std::string& s) -> std::string {
        auto alias = aliases.find(s);
        if (alias != aliases.end()) s = alias->second;
        if (std::find(names.begin(), names.end(), s) != names.end()) return "";
        std::string list, every;
        for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
        for (const auto& [from, to] : aliases) every += cat(", ", from);
        std::vector<std::string> all = names;
        for (const auto& kv : aliases) all.push_back(kv.first);
        const std::string guess = closest_name(s, all);
        return cat("expected one of ", list, every.empty() ? "" : " (or" + every.substr(1) + ")",
                   guess.empty() ? "" : "; did you mean " + guess + "?");
      },
      "");
}

// ---- The options ------------------------------------------------------------------------------

void add_engine_options(CLI::App* cmd, EngineArgs& e) {
  cmd->add_option("--backend", e.backend, "cpu, cuda, or auto (cuda when a GPU is present)")
      ->check(one_of({"auto", "cpu", "cuda"}))
      ->type_name("NAME");
  cmd->add_option("--dtype", e.dtype,
                  "compute dtype: bf16 (cuda default) or f32 (cpu); bfloat16 and float32 are "
                  "accepted for them")
      ->transform(one_of({"auto", "bf16", "f32"}, {{"bfloat16", "bf16"}, {"float32", "f32"}}))
      ->type_name("NAME");
  cmd->add_option("--device", e.device, "CUDA device index")->check(integer_in(0))->type_name("N");
  cmd->add_option("--max-seqs,--max-num-seqs", e.max_seqs, "most sequences in one step")
      ->check(integer_in(1))
      ->type_name("N");
  cmd->add_option("--max-batch-slots,--max-num-batched-tokens", e.max_batch_slots,
                  "most slots (tokens) in one step")
      ->check(integer_in(1))
      ->type_name("N");
  cmd->add_option("--block-size", e.block_size, "KV slots per block")
      ->check(integer_in(1, 1024))
      ->type_name("N")
      ->default_str("64 on cuda, 16 on cpu");
  cmd->add_option("--kv-blocks", e.kv_blocks,
                  "KV blocks (default: sized by --gpu-memory-fraction or --kv-cache-gib)")
      ->check(integer_in(1))
      ->type_name("N")
      ->default_str("");
  cmd->add_option("--gpu-memory-fraction,--gpu-memory-utilization", e.gpu_memory_fraction,
                  "cuda: share of GPU memory for weights, activations and KV")
      ->check(number_in(0.05, false, 1.0, false))
      ->type_name("F");
  cmd->add_option("--kv-cache-gib", e.kv_cache_gib, "cpu: KV pool size in GiB")
      ->check(number_in(0, true))
      ->type_name("GIB");
  cmd->add_flag("--no-prefix-sharing", e.no_prefix_sharing, "compute every prompt block");
  cmd->add_flag("--no-overlap", e.no_overlap,
                "wait for each step before scheduling the next (default: the host stages a step "
                "while the one before runs on the GPU)");
  cmd->add_flag("--megakernel", e.megakernel,
                "cuda, experimental: decode steps of 1-8 sequences as one persistent kernel "
                "launch (bf16; slower than the default graph of kernels so far, README)");
  cmd->add_flag("--batch-invariant", e.batch_invariant,
                "a job's tokens do not depend on the batch it runs in (cuda: bf16, fixed-order "
                "linear layers, slower; cpu: always so)");
  cmd->add_option("--model-table", e.model_table, "mapping table JSON (default: by architecture)")
      ->type_name("FILE");
  cmd->add_option("--kv-dtype", e.kv_dtype,
                  "KV cache element: auto (the compute dtype), bf16, or fp8 (e4m3 with scales, "
                  "half the bytes of bf16)")
      ->transform(one_of({"auto", "bf16", "fp8"}, {{"fp8_e4m3", "fp8"}, {"bfloat16", "bf16"}}))
      ->type_name("NAME");
  cmd->add_option("--kv-scales", e.kv_scales,
                  "fp8 KV scales JSON (from loom calibrate); without it every scale is 1.0")
      ->type_name("FILE");
}

void add_run(CLI::App* cmd, RunArgs& r) {
  cmd->add_option("--model,-m", r.model, "HF checkpoint directory")->required()->type_name("DIR");
  cmd->add_option("--jobs,-i", r.jobs, "jobs JSONL ('-' = stdin)")->required()->type_name("FILE");
  cmd->add_option("--out,-o", r.out, "results JSONL ('-' = stdout)")->required()->type_name("FILE");
  cmd->add_option("--report", r.report, "write a JSON timing report here ('-' = stdout)")
      ->type_name("FILE");
  cmd->add_option("--tokens-out", r.tokens_out,
                  "write a token dataset here: safetensors files of many samples, a "
                  "manifest.jsonl index and dataset.json")
      ->type_name("DIR");
  cmd->add_option("--samples-per-file", r.samples_per_file,
                  "dataset: samples per file (default: fill files to 256 MiB)")
      ->check(integer_in(1, kInt64Max))
      ->type_name("N")
      ->default_str("");
  cmd->add_option("--file-seconds", r.file_seconds,
                  "dataset: commit the open file at least this often; a kill loses at most "
                  "this much work")
      ->check(number_in(0, false, 86400, false))
      ->type_name("S");
  cmd->add_flag("--no-tokens-in-results", r.no_tokens_in_results,
                "with --tokens-out: records name their dataset file and rows instead of "
                "repeating the tokens");
  cmd->add_flag("--no-dataset-actions", r.no_dataset_actions, "dataset: leave out the action rows");
  cmd->add_flag("--no-dataset-context", r.no_dataset_context,
                "dataset: leave out the prompt's context frames");
  cmd->add_option("--placeholder-id", r.placeholder_id, "token id of action slots in prompts")
      ->check(integer_in(std::numeric_limits<int>::min()))
      ->type_name("ID");
  cmd->add_option("--overlap", r.overlap,
                  "frames carried into a new round (a job's \"overlap\" overrides it)")
      ->check(integer_in(1))
      ->type_name("N");
  cmd->add_option("--seed", r.sampling.seed, "sampling seed of jobs whose \"sampling\" gives none")
      ->check(seed_value())
      ->type_name("N");
  cmd->add_option("--temperature", r.sampling.temperature,
                  "temperature of jobs whose \"sampling\" gives none (0 = greedy)")
      ->check(temperature_value())
      ->type_name("T");
  cmd->add_option("--top-k", r.sampling.top_k,
                  "top_k of jobs whose \"sampling\" gives none (0 = off)")
      ->check(integer_in(0))
      ->type_name("K");
  cmd->add_option("--top-p", r.sampling.top_p,
                  "top_p of jobs whose \"sampling\" gives none (1 = off)")
      ->check(number_in(0, true, 1, false))
      ->type_name("P");
  cmd->add_flag("--resume", r.resume, "skip samples already in --out, append the rest");
  cmd->add_flag("--overwrite", r.overwrite,
                "replace an existing --out, --report and this shard's dataset");
  cmd->add_flag("--no-lock", r.no_lock,
                "do not lock the outputs (only for file systems without fcntl locks)");
  cmd->add_option("--shard", r.shard,
                  "K/N, auto (srun/mpirun/torchrun ranks) or array (Slurm array task); "
                  "default: every job")
      ->type_name("SHARD");
  cmd->add_option("--progress-interval", r.progress_interval,
                  "seconds between progress lines when stderr is not a terminal (at least "
                  "0.1)")
      ->check(number_in(kMinProgressInterval_s, false))
      ->type_name("S");
  cmd->add_flag("--quiet,-q", r.quiet, "no progress or summary on stderr");
  cmd->add_option("--log-format", r.log_format,
                  "stderr lines: text (stamped with the time when stderr is not a terminal) or "
                  "json (one object a line)")
      ->check(one_of({"text", "json"}))
      ->type_name("FORMAT");
  add_engine_options(cmd, r.engine);
}

void add_bench(CLI::App* cmd, BenchArgs& b, int& deprecated_jobs) {
  cmd->add_option("--model,-m", b.model, "HF checkpoint directory")->required()->type_name("DIR");
  cmd->add_option("--context-frames", b.context_frames, "context frames per job")
      ->check(integer_in(1))
      ->type_name("N");
  cmd->add_option("--frames", b.frames, "generated frames per job")
      ->check(integer_in(1))
      ->type_name("N");
  cmd->add_option("--batch-sizes", b.batch_sizes, "concurrent jobs, e.g. 1,8,64")
      ->delimiter(',')
      ->check(integer_in(1))
      ->type_name("N");
  cmd->add_option("--num-jobs", b.num_jobs, "throughput run with this many jobs (default: none)")
      ->check(integer_in(1))
      ->type_name("N")
      ->default_str("");
  cmd->add_option("--shared-group", b.shared_group,
                  "with --num-jobs: groups of this many jobs share context frames")
      ->check(integer_in(2))
      ->type_name("N")
      ->default_str("");
  cmd->add_flag("--shared-only", b.shared_only,
                "with --shared-group: only the shared pass (the unshared one measured apart)");
  cmd->add_option("--repeats", b.repeats, "timed repeats per batch size")
      ->check(integer_in(1))
      ->type_name("N");
  cmd->add_flag("--profile", b.profile, "per-kernel time breakdown");
  cmd->add_option("--json", b.json_out,
                  "write results as JSON here ('-' = stdout, the table to stderr)")
      ->type_name("FILE");
  cmd->add_flag("--overwrite", b.overwrite, "replace an existing --json file");
  add_engine_options(cmd, b.engine);
  cmd->add_option("--jobs", deprecated_jobs, "use --num-jobs (run --jobs is a file)")
      ->check(integer_in(1))
      ->type_name("N")
      ->default_str("")
      ->group("Deprecated");
}

void add_calibrate(CLI::App* cmd, CalibrateArgs& c) {
  cmd->add_option("--model,-m", c.model, "HF checkpoint directory")->required()->type_name("DIR");
  cmd->add_option("--jobs,-i", c.jobs, "jobs JSONL whose rollouts set the scales")
      ->required()
      ->type_name("FILE");
  cmd->add_option("--out,-o", c.out, "scales JSON to write (for run --kv-scales; '-' = stdout)")
      ->required()
      ->type_name("FILE");
  cmd->add_flag("--overwrite", c.overwrite, "replace an existing --out");
  cmd->add_option("--margin", c.margin, "scale = absmax x margin / 448")
      ->check(number_in(1.0, false, 64.0, false))
      ->type_name("F");
  cmd->add_option("--held-out-every", c.held_out_every,
                  "every Nth job is held out to count saturation instead of setting scales")
      ->check(integer_in(2))
      ->type_name("N");
  cmd->add_option("--granularity", c.granularity,
                  "head: a scale per (layer, kv head); layer: one per layer")
      ->check(one_of({"head", "layer"}))
      ->type_name("NAME");
  cmd->add_option("--placeholder-id", c.placeholder_id, "token id of action slots in prompts")
      ->check(integer_in(std::numeric_limits<int>::min()))
      ->type_name("ID");
  cmd->add_option("--overlap", c.overlap,
                  "frames carried into a new round (a job's \"overlap\" overrides it)")
      ->check(integer_in(1))
      ->type_name("N");
  add_engine_options(cmd, c.engine);
  // calibrate makes the scales, measuring with the KV cache in the compute dtype (or bf16):
  // --kv-scales and --kv-dtype fp8 are refused with the reason (calibrate.cpp), so --help does
  // not offer them.
  cmd->get_option("--kv-scales")->group("");
  cmd->get_option("--kv-dtype")
      ->description(
          "KV cache element while measuring: auto (the compute dtype) or bf16 (not fp8: "
          "the scales are for it)");
}

void add_merge(CLI::App* cmd, MergeArgs& m) {
  cmd->add_option("inputs", m.inputs, "shard result files")->type_name("FILE")->default_str("");
  cmd->add_option("--jobs,-i", m.jobs, "the jobs file: check every job has its records")
      ->type_name("FILE");
  cmd->add_option("--out,-o", m.out, "merged results or report ('-' = stdout)")->type_name("FILE");
  cmd->add_option("--reports", m.reports,
                  "shard run reports (--report): merge them into one report at --out")
      ->type_name("FILE")
      ->default_str("");
  cmd->add_option("--dataset", m.dataset,
                  "a --tokens-out folder: join its shards' manifests into manifest.jsonl "
                  "and dataset.json")
      ->type_name("DIR");
  cmd->add_flag("--allow-partial", m.allow_partial,
                "merge what is there when shards or jobs are missing, report them, exit 1");
  cmd->add_flag("--overwrite", m.overwrite, "replace an existing --out");
  cmd->add_flag("--no-lock", m.no_lock,
                "--dataset: skip the shards' locks, only on file systems without fcntl locks");
}

// ---- After the parse ------------------------------------------------------------------------

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// Options the user set on one subcommand, and where: a typed option that would be ignored is
// an error; a LOOM_ variable (a standing default) that would be is a warning.
struct Given {
  const CLI::App* cmd;
  std::vector<std::string> typed;  // options_on_command_line
  std::vector<std::string> args;   // the command line, argv[1] on
  // Options whose LOOM_ variable was ignored (unused): no run.from_env entry for them.
  mutable std::vector<std::string> ignored;

  bool set(const std::string& name) const { return cmd->get_option(name)->count() > 0; }
  // True when `name` came from its LOOM_ variable, now ignored: the caller drops its value.
  bool unused(const std::string& name, const std::string& why) const {
    if (!set(name)) return false;
    if (contains(typed, name)) fail(name, " ", why);
    log_warning(cat(env_name(name), " is ignored: ", name, " ", why));
    ignored.push_back(name);
    return true;
  }
};

// The backend a run takes: --backend, or for auto what the driver offers (asked only when an
// option's use depends on it: most runs give none of those).
std::string backend_of(const EngineArgs& e) {
  return e.backend != "auto" ? e.backend : choose_backend(e).backend_name();
}

// Options of one backend given to the other, and the pool sizes --kv-blocks overrides. An
// ignored variable's value goes back to the default, so the provenance's options say what ran.
void check_engine(const Given& g, EngineArgs& e) {
  if (g.set("--kv-blocks")) {
    for (const char* name : {"--kv-cache-gib", "--gpu-memory-fraction"})
      g.unused(name, "sizes the KV pool, which --kv-blocks fixes; expected one of them");
  }
  const bool backend_specific =
      g.set("--kv-cache-gib") || g.set("--gpu-memory-fraction") || g.set("--device");
  const std::string backend = backend_specific ? backend_of(e) : "";
  if (backend == "cuda")
    g.unused("--kv-cache-gib",
             "sizes the cpu backend's KV pool; on cuda expected --gpu-memory-fraction or "
             "--kv-blocks");
  if (backend == "cpu") {
    g.unused("--gpu-memory-fraction",
             "applies to cuda; on the cpu backend expected --kv-cache-gib or --kv-blocks");
    g.unused("--device", "selects a CUDA device; the cpu backend has none");
  }
  const EngineArgs d;
  if (contains(g.ignored, "--kv-cache-gib")) e.kv_cache_gib = d.kv_cache_gib;
  if (contains(g.ignored, "--gpu-memory-fraction")) e.gpu_memory_fraction = d.gpu_memory_fraction;
  if (contains(g.ignored, "--device")) e.device = d.device;
}

void finish_run(const Given& g, RunArgs& r) {
  // RunArgs::shard "" means no --shard; a typed empty value (`--shard "$SHARD"`, SHARD unset)
  // is a mistake, not a request for every job. (An empty LOOM_SHARD is unset: CLI11 skips it.)
  LOOM_CHECK(!g.set("--shard") || !r.shard.empty(), "--shard \"\": expected K/N, auto or array");
  if (r.tokens_out.empty()) {
    for (const char* name :
         {"--samples-per-file", "--file-seconds", "--no-dataset-actions", "--no-dataset-context"})
      g.unused(name, "applies to the token dataset; expected --tokens-out DIR with it");
    if (g.unused("--no-tokens-in-results",
                 "needs --tokens-out DIR: without it the tokens would be written nowhere"))
      r.no_tokens_in_results = false;
  }
  if (r.engine.kv_dtype != "fp8" &&
      g.unused("--kv-scales", "applies to an fp8 KV cache; expected --kv-dtype fp8 with it"))
    r.engine.kv_scales.clear();
  check_engine(g, r.engine);
  // (bench takes it on the cpu too, and records that no step used it.)
  if (g.set("--megakernel") && backend_of(r.engine) == "cpu")
    g.unused("--megakernel", "is a cuda decode path; the cpu backend has none");
  r.overlap_given = g.set("--overlap");
  for (const CLI::Option* o : g.cmd->get_options()) {
    const std::string name = o->get_name();
    if (o->count() > 0 && !o->get_envname().empty() && !contains(g.typed, name) &&
        !contains(g.ignored, name))
      r.from_env.push_back(o->get_envname());
  }
  if (contains(r.from_env, env_name("--overlap"))) r.overlap_note = " (from LOOM_OVERLAP)";
}

void finish_bench(const Given& g, CliArgs& a) {
  BenchArgs& b = a.bench;
  if (g.set("--jobs")) {
    LOOM_CHECK(!g.set("--num-jobs"),
               "bench: --jobs N and --num-jobs N both given; expected --num-jobs only");
    std::fprintf(stderr,
                 "loom: warning: bench --jobs N is deprecated (run --jobs is a file); use "
                 "--num-jobs N\n");
    b.num_jobs = a.bench_jobs;
  }
  LOOM_CHECK(b.shared_group == 0 || b.num_jobs > 0, "--shared-group ", b.shared_group,
             " groups the throughput run's jobs; expected --num-jobs N with it");
  LOOM_CHECK(!b.shared_only || b.shared_group > 0,
             "--shared-only keeps only the shared pass; expected --shared-group N with it");
  if (b.shared_group > 0) {
    LOOM_CHECK(b.num_jobs >= 2, "--shared-group ", b.shared_group,
               ": expected no --shared-group with --num-jobs ", b.num_jobs,
               " (a group shares among at least 2 jobs)");
    LOOM_CHECK(b.shared_group <= b.num_jobs, "--shared-group ", b.shared_group,
               ": expected an integer in [2, ", b.num_jobs, "] (a group of the --num-jobs ",
               b.num_jobs, " jobs)");
    g.unused("--no-prefix-sharing", cat("turns off the sharing that --shared-group ",
                                        b.shared_group, " measures; expected one of them"));
  }
  // CLI11 drops the empty items of a list before any validator sees it ("1,,2" ran batch sizes
  // 1 and 2), so the list is looked for as typed: --batch-sizes V..., --batch-sizes=V. A second
  // --batch-sizes added to the first; every other option given twice is refused.
  int lists = 0;
  for (size_t i = 0; i < g.args.size(); i++) {
    std::vector<std::string> values;
    const std::string& arg = g.args[i];
    if (arg.rfind("--batch-sizes=", 0) == 0) values.push_back(arg.substr(arg.find('=') + 1));
    if (arg == "--batch-sizes" || arg.rfind("--batch-sizes=", 0) == 0) lists++;
    if (arg == "--batch-sizes")
      while (i + 1 < g.args.size() && g.args[i + 1].rfind('-', 0) != 0)
        values.push_back(g.args[++i]);
    for (const std::string& v : values)
      LOOM_CHECK(("," + v + ",").find(",,") == std::string::npos, "--batch-sizes ", v,
                 ": expected integers >= 1 separated by commas, found an empty item");
  }
  LOOM_CHECK(lists <= 1, "--batch-sizes given more than once; expected it once (a list: 1,8,64)");
  std::string sizes;
  for (int v : b.batch_sizes) sizes += cat(sizes.empty() ? "" : ",", v);
  for (size_t i = 0; i < b.batch_sizes.size(); i++)
    for (size_t j = 0; j < i; j++)
      LOOM_CHECK(b.batch_sizes[i] != b.batch_sizes[j], "--batch-sizes ", sizes, ": ",
                 b.batch_sizes[i], " given twice; expected each batch size once");
  // A latency row runs its batch size's jobs at once: limits below it would make the row
  // another measurement than its label (--max-seqs was raised to it, silently).
  const int largest = *std::max_element(b.batch_sizes.begin(), b.batch_sizes.end());
  if (g.set("--max-seqs"))
    LOOM_CHECK(b.engine.max_seqs >= largest, "--max-seqs ", b.engine.max_seqs,
               ": expected at least ", largest, ", the largest of --batch-sizes ", sizes,
               " (a latency row runs that many jobs at once)");
  if (g.set("--max-batch-slots"))
    LOOM_CHECK(b.engine.max_batch_slots >= largest, "--max-batch-slots ", b.engine.max_batch_slots,
               ": expected at least ", largest, ", the largest of --batch-sizes ", sizes,
               " (a decode step of that row takes one slot a job)");
  // CLI11 counts no value for `--json ""`: the empty string is looked for as typed.
  for (size_t i = 0; i < g.args.size(); i++)
    LOOM_CHECK(g.args[i] != "--json" || i + 1 == g.args.size() || !g.args[i + 1].empty(),
               "--json: expected a file path or - (stdout), found an empty string");
  if (b.json_out.empty() || b.json_out == "-")
    g.unused("--overwrite", b.json_out.empty()
                                ? "replaces an existing --json file; expected --json FILE with it"
                                : "replaces an existing --json file; --json - writes to stdout");
  check_engine(g, b.engine);
  if (g.set("--profile") && backend_of(b.engine) == "cpu" &&
      g.unused("--profile", "times CUDA kernels; the cpu backend has none to time"))
    b.profile = false;
}

void finish_inspect(CliArgs& a) {
  if (!a.inspect_dir.empty()) {
    LOOM_CHECK(a.inspect.model.empty(), "inspect: a folder (", a.inspect_dir,
               ") and --model DIR both given; expected --model DIR only");
    std::fprintf(stderr, "loom: warning: `loom inspect DIR` is deprecated; use --model DIR\n");
    a.inspect.model = a.inspect_dir;
  }
  LOOM_CHECK(!a.inspect.model.empty(), "inspect: expected --model DIR (HF checkpoint directory)");
}

}  // namespace

std::string env_name(const std::string& long_option) {
  std::string e = "LOOM_";
  for (char c : long_option.substr(long_option.find_first_not_of('-')))
    e += c == '-' ? '_' : char(std::toupper((unsigned char)c));
  return e;
}

CliCommands add_commands(CLI::App& app, CliArgs& a, bool with_env) {
  // Subcommands copy these settings when they are made, so they come first.
  app.option_defaults()->always_capture_default();
  app.require_subcommand(1);
  CliCommands c;
  c.run = app.add_subcommand("run", "generate for every job of a JSONL file");
  add_run(c.run, a.run);
  c.inspect = app.add_subcommand(
      "inspect", "print what loom makes of a checkpoint, and the job line it takes");
  c.inspect->add_option("--model,-m", a.inspect.model, "HF checkpoint directory")->type_name("DIR");
  c.inspect->add_option("--model-table", a.inspect.model_table, "mapping table JSON")
      ->type_name("FILE");
  c.inspect->add_flag("--json", a.inspect.json, "spec, roles and job template as JSON");
  c.inspect->add_option("dir", a.inspect_dir, "deprecated: use --model DIR")->group("Deprecated");
  c.merge = app.add_subcommand(
      "merge", "join shard result files in input order; or shard reports; or dataset shards");
  add_merge(c.merge, a.merge);
  c.bench = app.add_subcommand("bench", "time synthetic frame jobs");
  add_bench(c.bench, a.bench, a.bench_jobs);
  c.calibrate = app.add_subcommand(
      "calibrate", "FP8 KV scales from rollouts of real jobs (for run --kv-dtype fp8)");
  add_calibrate(c.calibrate, a.calibrate);
  c.verify = app.add_subcommand(
      "verify", "check a --tokens-out folder: every index, data file and SHA-256 as loom wrote it");
  c.verify->add_option("dir", a.verify.dir, "the --tokens-out folder")
      ->type_name("DIR")
      ->required();
  c.verify
      ->add_option("--threads", a.verify.threads, "files hashed at once (0: a core each, up to 8)")
      ->check(integer_in(0, 256))
      ->type_name("N");
  c.verify->add_flag("--json", a.verify.json, "the result as one JSON object on stdout");
  if (with_env) {
    // CLI11 reads the variables of a subcommand without a parse-complete callback even when
    // another command runs (LOOM_MAX_SEQS=0 failed `loom inspect`); with one, only when run is.
    c.run->parse_complete_callback([] {});
    for (CLI::Option* o : c.run->get_options())
      if (!o->get_lnames().empty() && o->get_lnames()[0] != "help")
        o->envname(env_name(o->get_name()));
  }
  return c;
}

std::vector<std::string> options_on_command_line(int argc, const char* const* argv) {
  CLI::App probe;
  probe.allow_extras();  // errors were (or will be) reported by the real parse
  CliArgs scratch;
  add_commands(probe, scratch, false);
  try {
    probe.parse(argc, argv);
  } catch (const CLI::Error&) {
    // The counts of what was parsed before the error still stand.
  }
  std::vector<std::string> given;
  for (const CLI::App* sub : probe.get_subcommands())
    for (const CLI::Option* o : sub->get_options())
      if (o->count() > 0) given.push_back(o->get_name());
  return given;
}

void finish_args(const CliCommands& cmd, CliArgs& a, int argc, const char* const* argv) {
  if (*cmd.inspect) return finish_inspect(a);
  const CLI::App* sub = *cmd.run         ? cmd.run
                        : *cmd.bench     ? cmd.bench
                        : *cmd.calibrate ? cmd.calibrate
                                         : nullptr;
  if (!sub) return;
  const Given g{sub, options_on_command_line(argc, argv), {argv + 1, argv + argc}};
  if (*cmd.run) finish_run(g, a.run);
  if (*cmd.bench) finish_bench(g, a);
  if (*cmd.calibrate) {
    check_engine(g, a.calibrate.engine);
    a.calibrate.overlap_given = g.set("--overlap");
  }
}

}  // namespace loom
