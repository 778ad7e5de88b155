#include "app/setup.h"

#include <chrono>
#include <cstdio>

#include "core/error.h"

namespace loom {

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

BackendChoice choose_backend(const EngineArgs& args) {
  std::string why;
  BackendChoice c;
  if (args.backend == "cuda") {
    LOOM_CHECK(cuda_available(&why), "--backend cuda: no usable CUDA device (", why,
               "); run on a GPU machine or pass --backend cpu");
    c.kind = BackendKind::Cuda;
  } else if (args.backend == "auto" && cuda_available(&why)) {
    c.kind = BackendKind::Cuda;
  }
  c.dtype = c.kind == BackendKind::Cuda ? ComputeDType::BF16 : ComputeDType::F32;
  if (args.dtype == "f32") c.dtype = ComputeDType::F32;
  if (args.dtype == "bf16") {
    LOOM_CHECK(c.kind == BackendKind::Cuda, "--dtype bf16 needs the cuda backend (",
               args.backend == "auto" ? why : "--backend cpu given",
               "); the cpu backend computes in f32");
    c.dtype = ComputeDType::BF16;
  }
  return c;
}

OpenedModel open_model(const std::string& model_dir, const EngineArgs& args, bool quiet) {
  return open_model(model_dir, args, choose_backend(args), quiet);
}

OpenedModel open_model(const std::string& model_dir, const EngineArgs& args,
                       const BackendChoice& choice, bool quiet) {
  OpenedModel om;
  const double t0 = now_seconds();
  LoadOptions lo;
  lo.table_path = args.model_table;
  om.model = load_model(model_dir, lo);
  if (!quiet)
    for (const std::string& w : om.model.warnings)
      std::fprintf(stderr, "loom: warning: %s\n", w.c_str());
  om.backend = make_backend(choice.kind, choice.dtype, args.device, args.batch_invariant);
  om.backend->load(om.model.spec, om.model.weights);
  om.backend_name = om.backend->name();
  om.dtype_name = choice.dtype_name();
  om.batch_invariant = om.backend->batch_invariant();
  om.load_s = now_seconds() - t0;
  return om;
}

EngineOptions engine_options(const EngineArgs& a) {
  EngineOptions o;
  o.scheduler.max_seqs = a.max_seqs;
  o.scheduler.max_batch_slots = a.max_batch_slots;
  o.scheduler.prefix_sharing = !a.no_prefix_sharing;
  o.cache.block_size = a.block_size;
  o.cache.num_blocks = a.kv_blocks;
  o.cache.gpu_memory_fraction = a.gpu_memory_fraction;
  o.cache.host_cache_gib = a.kv_cache_gib;
  return o;
}

}  // namespace loom
