// Wiring shared by `run` and `bench`: model loading, backend choice, and what their
// provenance block says about options, model and device.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "app/commands.h"
#include "backend/backend.h"
#include "engine/engine.h"
#include "io/provenance.h"
#include "model/mapping.h"

namespace loom {

struct OpenedModel {
  LoadedModel model;
  std::unique_ptr<Backend> backend;
  std::string backend_name, dtype_name;
  // Weight bytes one decode step streams as the backend holds them (dtype_name's element, not
  // the checkpoint's: the cpu computes a bf16 checkpoint in f32).
  size_t step_bytes() const { return size_t(model.step_params) * (dtype_name == "f32" ? 4 : 2); }
  bool batch_invariant = false;  // the backend's answer (cpu: always true)
  CacheRequest kv_cache;         // --kv-dtype and --kv-scales (read once), for engine_options
  std::string kv_dtype;          // the KV cache's element: "f32", "bf16" or "fp8"
  std::string kv_scales_source;  // fp8 KV: the scales file, or "default 1.0"; else empty
  double load_s = 0;             // checkpoint open → weights on the backend
};

// The backend and dtype `args` ask for, decided before any weight is read (cheap: it asks
// the CUDA driver for devices). Throws loom::Error when the request cannot be met. --backend
// auto with the CUDA module present: a GPU it cannot use (cuda_status() Unusable, or an NVIDIA
// device on the PCI bus or /dev/nvidia0 that the driver does not count) is an error naming the
// cause; with no GPU at all, `note` says that it runs on the CPU (printed by the caller after
// its own checks, so a refused run stays one error line).
struct BackendChoice {
  BackendKind kind = BackendKind::Cpu;
  ComputeDType dtype = ComputeDType::F32;
  std::string note;  // said once by the caller (info): why --backend auto took the CPU
  std::string backend_name() const { return kind == BackendKind::Cuda ? "cuda" : "cpu"; }
  std::string dtype_name() const { return dtype == ComputeDType::F32 ? "f32" : "bf16"; }
};
BackendChoice choose_backend(const EngineArgs& args);

// Loads the checkpoint and hands it to the chosen backend, then reads the KV format (--kv-dtype,
// --kv-scales); prints load warnings (under --quiet too) and notes (unless quiet).
OpenedModel open_model(const std::string& model_dir, const EngineArgs& args, bool quiet);
OpenedModel open_model(const std::string& model_dir, const EngineArgs& args,
                       const BackendChoice& choice, bool quiet);
// With the KV format `kv` read before (run reads --kv-scales once, in prepare_outputs: the
// scales it records in its identity are the scales it runs with).
OpenedModel open_model(const std::string& model_dir, const EngineArgs& args,
                       const BackendChoice& choice, const CacheRequest& kv, bool quiet);
// The engine's options, with the KV format open_model read (om.kv_cache).
EngineOptions engine_options(const EngineArgs& args, const OpenedModel& om);
// --kv-dtype / --kv-scales as a cache format for `spec` (throws naming the option or file);
// reads the scales file, once a call.
void kv_format(const EngineArgs& args, const ModelSpec& spec, CacheRequest& cache);
double now_seconds();
// The files a command reads besides its jobs: the model's (model_input_files) and --kv-scales.
// No output may be one of them.
std::vector<std::string> model_inputs(const std::string& model_dir, const EngineArgs& args);

// Every option of the command after defaults (and LOOM_* variables), as the provenance
// block's "options".
nlohmann::ordered_json options_json(const RunArgs& a);
nlohmann::ordered_json options_json(const BenchArgs& a);
// Fills what the opened model and its backend tell: backend, dtypes, device, driver, runtime.
void describe_backend(OpenedModel& om, RunProvenance& p);
// The provenance block of a `loom bench` run (also set for the process).
nlohmann::ordered_json bench_provenance(const BenchArgs& a, OpenedModel& om);

}  // namespace loom
