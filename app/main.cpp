// loom: offline batch inference for autoregressive video-token world models.
// Argument parsing and wiring only; the commands are in app/*.cpp.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

#include "app/commands.h"
#include "core/error.h"
#include "io/provenance.h"

using namespace loom;

static void add_engine_options(CLI::App* cmd, EngineArgs& e) {
  cmd->add_option("--backend", e.backend, "cpu, cuda, or auto (cuda when a GPU is present)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  cmd->add_option("--dtype", e.dtype, "compute dtype: bf16 (cuda default) or f32 (cpu)")
      ->check(CLI::IsMember({"auto", "bf16", "f32"}));
  cmd->add_option("--device", e.device, "CUDA device index");
  cmd->add_option("--max-seqs", e.max_seqs, "most sequences in one step")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-batch-slots", e.max_batch_slots, "most slots in one step")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--block-size", e.block_size, "KV slots per block")->check(CLI::Range(1, 1024));
  cmd->add_option("--kv-blocks", e.kv_blocks, "KV blocks (default: sized from memory)");
  cmd->add_option("--gpu-memory-fraction", e.gpu_memory_fraction,
                  "share of GPU memory for weights, activations and KV")
      ->check(CLI::Range(0.05, 1.0));
  cmd->add_option("--kv-cache-gib", e.kv_cache_gib, "cpu backend: KV pool size in GiB")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--no-prefix-sharing", e.no_prefix_sharing, "compute every prompt block");
  cmd->add_flag("--batch-invariant", e.batch_invariant,
                "a job's tokens do not depend on the batch it runs in (cuda: bf16, fixed-order "
                "linear layers, slower; cpu: always so)");
  cmd->add_option("--model-table", e.model_table, "mapping table JSON (default: by architecture)");
}

int main(int argc, char** argv) {
  CLI::App app{"loom: fast offline batch inference for video-token world models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", version_text());

  RunArgs run;
  CLI::App* run_cmd = app.add_subcommand("run", "generate for every job of a JSONL file");
  run_cmd->add_option("--model", run.model, "HF checkpoint directory")->required();
  run_cmd->add_option("--jobs", run.jobs, "jobs JSONL ('-' = stdin)")->required();
  run_cmd->add_option("--out", run.out, "results JSONL ('-' = stdout)")->required();
  run_cmd->add_option("--report", run.report, "write a JSON timing report here");
  run_cmd->add_option("--tokens-out", run.tokens_out,
                      "write a token dataset here: safetensors files of many samples, a "
                      "manifest.jsonl index and dataset.json");
  run_cmd
      ->add_option("--samples-per-file", run.samples_per_file,
                   "dataset: samples per file (default: fill files to 256 MiB)")
      ->check(CLI::PositiveNumber);
  run_cmd
      ->add_option("--file-seconds", run.file_seconds,
                   "dataset: commit the open file at least this often; a kill loses at most "
                   "this much work (default 60)")
      ->check(CLI::Range(0.0, 86400.0));
  run_cmd->add_flag("--no-tokens-in-results", run.no_tokens_in_results,
                    "with --tokens-out: records name their dataset file and rows instead of "
                    "repeating the tokens");
  run_cmd->add_flag("--no-dataset-actions", run.no_dataset_actions,
                    "dataset: leave out the action rows");
  run_cmd->add_flag("--no-dataset-context", run.no_dataset_context,
                    "dataset: leave out the prompt's context frames");
  run_cmd->add_option("--placeholder-id", run.placeholder_id,
                      "token id of action slots in prompts");
  run_cmd->add_option("--overlap", run.overlap, "frames carried into a new round (default 3)");
  run_cmd->add_flag("--resume", run.resume, "skip samples already in --out, append the rest");
  run_cmd->add_flag("--overwrite", run.overwrite,
                    "replace an existing --out, --report and this shard's dataset");
  run_cmd->add_flag("--no-lock", run.no_lock,
                    "do not lock the outputs (only for file systems without fcntl locks)");
  run_cmd->add_option("--shard", run.shard,
                      "K/N, auto (srun/mpirun/torchrun ranks) or array (Slurm array task); "
                      "default: every job");
  run_cmd->add_option("--progress-interval", run.progress_interval,
                      "seconds between progress lines when stderr is not a terminal");
  run_cmd->add_flag("--quiet,-q", run.quiet, "no progress or summary on stderr");
  run_cmd
      ->add_option("--log-format", run.log_format,
                   "stderr lines: text, or json (one object a line)")
      ->check(CLI::IsMember({"text", "json"}));
  add_engine_options(run_cmd, run.engine);

  std::string inspect_dir, inspect_table;
  CLI::App* inspect_cmd = app.add_subcommand("inspect", "print what loom makes of a checkpoint");
  inspect_cmd->add_option("model", inspect_dir, "HF checkpoint directory")->required();
  inspect_cmd->add_option("--model-table", inspect_table, "mapping table JSON");

  MergeArgs merge;
  CLI::App* merge_cmd = app.add_subcommand(
      "merge", "join shard result files in input order; or shard reports; or dataset shards");
  merge_cmd->add_option("inputs", merge.inputs, "shard result files");
  merge_cmd->add_option("--jobs", merge.jobs, "the jobs file: check every job has its records");
  merge_cmd->add_option("--out", merge.out, "merged results or report ('-' = stdout)");
  merge_cmd->add_option("--reports", merge.reports,
                        "shard run reports (--report): merge them into one report at --out");
  merge_cmd->add_option("--dataset", merge.dataset,
                        "a --tokens-out folder: join its shards' manifests into manifest.jsonl "
                        "and dataset.json");
  merge_cmd->add_flag("--allow-partial", merge.allow_partial,
                      "merge what is there when shards or jobs are missing, report them, exit 1");

  BenchArgs bench;
  CLI::App* bench_cmd = app.add_subcommand("bench", "time synthetic frame jobs");
  bench_cmd->add_option("--model", bench.model, "HF checkpoint directory")->required();
  bench_cmd->add_option("--context-frames", bench.context_frames, "context frames per job");
  bench_cmd->add_option("--frames", bench.frames, "generated frames per job");
  bench_cmd->add_option("--batch-sizes", bench.batch_sizes, "concurrent jobs, e.g. 1,8,64")
      ->delimiter(',');
  bench_cmd->add_option("--jobs", bench.jobs, "throughput run with this many jobs");
  bench_cmd->add_option("--shared-group", bench.shared_group,
                        "throughput run: groups of this many jobs share context frames");
  bench_cmd->add_flag(
      "--shared-only", bench.shared_only,
      "with --shared-group: only the shared pass (the unshared one measured apart)");
  bench_cmd->add_option("--repeats", bench.repeats, "timed repeats per batch size");
  bench_cmd->add_flag("--profile", bench.profile, "per-kernel time breakdown");
  bench_cmd->add_option("--json", bench.json_out, "write results as JSON here");
  add_engine_options(bench_cmd, bench.engine);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kExitOk : kExitFatal;
  }
  try {
    if (*run_cmd) return run_command(run);
    if (*inspect_cmd) return inspect_command(inspect_dir, inspect_table);
    if (*merge_cmd) return merge_command(merge);
    if (*bench_cmd) return bench_command(bench);
  } catch (const Error& e) {
    std::fprintf(stderr, "loom: error: %s\n", e.what());
    return kExitFatal;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "loom: error: out of host memory; lower --max-seqs or --kv-cache-gib\n");
    return kExitFatal;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loom: internal error: %s\n", e.what());
    return kExitFatal;
  }
  return kExitFatal;
}
