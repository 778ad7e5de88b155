// Wiring shared by `run` and `bench`: model loading and backend choice.
#pragma once

#include <memory>
#include <string>

#include "app/commands.h"
#include "backend/backend.h"
#include "engine/engine.h"
#include "model/mapping.h"

namespace loom {

struct OpenedModel {
  LoadedModel model;
  std::unique_ptr<Backend> backend;
  std::string backend_name, dtype_name;
  bool batch_invariant = false;  // the backend's answer (cpu: always true)
  double load_s = 0;             // checkpoint open → weights on the backend
};

// The backend and dtype `args` ask for, decided before any weight is read (cheap: it asks
// the CUDA driver for devices). Throws loom::Error when the request cannot be met.
struct BackendChoice {
  BackendKind kind = BackendKind::Cpu;
  ComputeDType dtype = ComputeDType::F32;
  std::string backend_name() const { return kind == BackendKind::Cuda ? "cuda" : "cpu"; }
  std::string dtype_name() const { return dtype == ComputeDType::F32 ? "f32" : "bf16"; }
};
BackendChoice choose_backend(const EngineArgs& args);

// Loads the checkpoint and hands it to the chosen backend; prints load warnings unless quiet.
OpenedModel open_model(const std::string& model_dir, const EngineArgs& args, bool quiet);
OpenedModel open_model(const std::string& model_dir, const EngineArgs& args,
                       const BackendChoice& choice, bool quiet);
EngineOptions engine_options(const EngineArgs& args);
double now_seconds();

}  // namespace loom
