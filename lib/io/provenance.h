// Where an artifact came from (issue 14 §1), in two parts.
//
// The build: loom's version, the git commit and whether tracked files differed from it, the
// build type, CUDA on/off with its architectures, and the compilers. They come from
// generated/loom_build_info.h, which every `cmake --build` refreshes (cmake/loom_build_info.cmake),
// so `loom --version` names the commit the binary was built from; a tree without git says
// "unknown".
//
// The run: one JSON block (provenance_json) with the build, the UTC start time, the host, the
// command line, the resolved options, the shard, the model, the backend, the dtypes of weights
// and KV, and the device with its driver and CUDA runtime versions. The command that runs
// (`loom run`, `loom bench`) builds it once and sets it for the process (set_run_provenance);
// every artifact writer — run report, bench JSON, dataset.json, each dataset file's metadata,
// the results side file — copies that one block, so they cannot disagree. It is process-wide on
// purpose: one process is one run, and the writers live in layers that should not each take a
// provenance argument.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace loom {

struct BuildInfo {
  std::string version;        // kLoomVersion
  std::string commit;         // "96e7c70" (git rev-parse --short HEAD), or "unknown"
  bool dirty = false;         // tracked files differed from the commit when it was built
  std::string build_type;     // CMAKE_BUILD_TYPE: "Release", "Debug", ...
  bool cuda = false;          // the CUDA backend is compiled in
  std::string cuda_archs;     // "sm_90a" ("" without CUDA)
  std::string compiler;       // "GNU 12.2.0"
  std::string cuda_compiler;  // "NVIDIA 13.0.88" ("" without CUDA)
};
const BuildInfo& build_info();

// "96e7c70", "96e7c70-dirty" or "unknown".
std::string commit_text();
// What `loom --version` prints: "loom 0.2.0" on the first line, then commit and build.
std::string version_text();

// When this process started (taken during static initialization, before main).
std::chrono::system_clock::time_point process_start_time();

// The argv of this process as the kernel holds it (/proc/self/cmdline); empty where unreadable.
std::vector<std::string> process_argv();
// `word` as a POSIX shell reads it back: unchanged when it holds only safe characters
// (letters, digits, and %+,-./:=@_), else in single quotes ('it'\''s').
std::string shell_quote(const std::string& word);
// The words quoted and joined by spaces: a command line that can be pasted into a shell.
std::string shell_join(const std::vector<std::string>& words);

// What a run's provenance block says beyond the build; filled by the command that runs.
struct RunProvenance {
  std::string started_utc;                    // process_start_time(), ISO 8601 UTC
  std::string host;                           // gethostname
  std::vector<std::string> argv;              // process_argv()
  nlohmann::ordered_json options;             // every option after defaults and environment
  std::vector<std::string> options_from_env;  // options set by LOOM_* variables
  int shard_index = 0, shard_count = 1;
  std::string shard_source;  // how the shard was found ("--shard 1/4", ...)
  std::string model_path, architecture, config_hash;  // config_hash: model/fingerprint.h
  std::string backend;                                // "cpu", "cuda"
  std::string weight_dtype, kv_dtype;                 // "bf16", "f32", "fp8"
  std::string kv_scales;             // fp8 KV: the scales' source (file, "default 1.0"); else empty
  std::string device;                // "NVIDIA H100 80GB HBM3", "cpu"
  std::string driver, cuda_runtime;  // "13.0"; "n/a" on the cpu
};

// The block: {"loom_version", "commit", "dirty", "build": {...}, "started_utc", "host",
// "command_line", "argv", "options", "options_from_env", "shard", "model", "backend", "dtype":
// {"weights", "kv"}, "device": {"name", "driver", "cuda_runtime"}}.
nlohmann::ordered_json provenance_json(const RunProvenance& p);

void set_run_provenance(nlohmann::ordered_json block);
// The block set for this process; null when none was set (tools, tests, `loom merge`), and
// then writers leave the field out.
const nlohmann::ordered_json& run_provenance();

}  // namespace loom
