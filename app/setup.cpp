#include "app/setup.h"

#include <dirent.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <fstream>

#include "app/log.h"
#include "backend/module.h"
#include "core/error.h"
#include "engine/report.h"
#include "io/kv_scales.h"
#include "io/outputs.h"
#include "model/fingerprint.h"

namespace loom {
namespace {

// Where this machine shows an NVIDIA GPU that the driver does not count (no driver loaded,
// devices hidden): a display or 3D controller of vendor 0x10de on the PCI bus, else a
// /dev/nvidia0 node (containers often hide the PCI tree but pass the node). "" when neither.
std::string nvidia_gpu_seen() {
  const std::string bus = "/sys/bus/pci/devices";
  if (DIR* d = ::opendir(bus.c_str())) {
    std::string found;
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] == '.') continue;
      std::string vendor, cls;
      std::ifstream(bus + "/" + e->d_name + "/vendor") >> vendor;
      std::ifstream(bus + "/" + e->d_name + "/class") >> cls;
      // class 0x0300xx: VGA controller, 0x0302xx: 3D controller (data-center GPUs).
      if (vendor == "0x10de" && (cls.rfind("0x0300", 0) == 0 || cls.rfind("0x0302", 0) == 0)) {
        found = std::string("an NVIDIA GPU at PCI ") + e->d_name;
        break;
      }
    }
    ::closedir(d);
    if (!found.empty()) return found;
  }
  struct stat sb {};
  if (::stat("/dev/nvidia0", &sb) == 0) return "an NVIDIA GPU (/dev/nvidia0)";
  return "";
}

}  // namespace

std::vector<std::string> model_inputs(const std::string& model_dir, const EngineArgs& args) {
  std::vector<std::string> files = model_input_files(model_dir, args.model_table);
  if (!args.kv_scales.empty()) files.push_back(args.kv_scales);
  return files;
}

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
  } else if (args.backend == "auto") {
    // A GPU loom cannot use (driver too old, libraries missing, devices hidden) must not slip
    // onto the CPU, hundreds of times slower, without a word; no GPU at all is said once.
    const CudaStatus& cuda = cuda_status();
    why = cuda.why;
    const bool no_gpu = cuda.state == CudaState::NoDevice || cuda.state == CudaState::Absent;
    const std::string seen = no_gpu ? nvidia_gpu_seen() : "";
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    if (cuda.state == CudaState::Ready) {
      c.kind = BackendKind::Cuda;
    } else if (cuda.state == CudaState::Absent && !seen.empty() && !build_info().cuda) {
      c.note = cat("--backend auto: this machine has ", seen,
                   " but this build of loom has no CUDA backend (built without nvcc); running "
                   "on the CPU (f32)");
    } else if (cuda.state == CudaState::Unusable || !seen.empty()) {
      // (Absent in a CUDA build: its module is missing, cuda.why says where it was looked for.)
      fail("--backend auto: ",
           seen.empty() ? "the NVIDIA driver sees a GPU" : "this machine has " + seen,
           " but loom cannot use it (", cuda.why,
           visible ? cat("; CUDA_VISIBLE_DEVICES=\"", visible, "\"") : std::string(),
           "); fix the driver or CUDA setup, or pass --backend cpu to run on the CPU");
    } else if (cuda.state == CudaState::NoDevice) {
      c.note =
          "--backend auto: no GPU on this machine (" + cuda.why + "); running on the CPU (f32)";
    }  // Absent: a build or install without CUDA, the cpu as expected (the banner says so)
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
  const BackendChoice choice = choose_backend(args);
  if (!choice.note.empty() && !quiet) log_info(choice.note);
  return open_model(model_dir, args, choice, quiet);
}

namespace {

// The checkpoint on the chosen backend, without its KV format yet (set_kv_format).
OpenedModel load_on_backend(const std::string& model_dir, const EngineArgs& args,
                            const BackendChoice& choice, bool quiet) {
  OpenedModel om;
  const double t0 = now_seconds();
  LoadOptions lo;
  lo.table_path = args.model_table;
  om.model = load_model(model_dir, lo);
  // --quiet leaves out progress, summaries and notes, never warnings.
  for (const std::string& w : om.model.warnings) log_warning(w);
  if (!quiet)
    for (const std::string& n : om.model.notes) log_info(n);
  try {
    om.backend = make_backend(choice.kind, choice.dtype, args.device, args.batch_invariant);
    om.backend->set_megakernel(args.megakernel);
    om.backend->load(om.model.spec, om.model.weights);
  } catch (const Error& e) {
    if (args.backend != "auto" || choice.kind != BackendKind::Cuda) throw;
    fail("--backend auto found a GPU but could not use it: ", e.what(),
         "; pass --backend cpu to run on the CPU");
  }
  om.backend_name = om.backend->name();
  om.dtype_name = choice.dtype_name();
  om.batch_invariant = om.backend->batch_invariant();
  om.load_s = now_seconds() - t0;
  return om;
}

// Takes `kv` as the model's KV format. FP8 without scales is warned of once, --quiet or not:
// --quiet keeps warnings (python/loom/runner.py relies on it).
void set_kv_format(OpenedModel& om, const CacheRequest& kv, const BackendChoice& choice) {
  om.kv_cache = kv;  // (kv_format checked the scales' shape; the backend checks it again)
  om.kv_dtype = kv.kv_dtype == KvDType::Auto ? choice.dtype_name() : kv_dtype_name(kv.kv_dtype);
  if (kv.kv_dtype != KvDType::FP8) return;
  om.kv_scales_source = kv.kv_scales.empty() ? "default 1.0" : kv.kv_scales.source;
  if (kv.kv_scales.empty())
    log_warning(
        "--kv-dtype fp8 without --kv-scales: every K and V scale is 1.0, so values beyond "
        "448 saturate and small ones lose precision; make scales with loom calibrate");
}

}  // namespace

OpenedModel open_model(const std::string& model_dir, const EngineArgs& args,
                       const BackendChoice& choice, bool quiet) {
  OpenedModel om = load_on_backend(model_dir, args, choice, quiet);
  CacheRequest kv;
  kv_format(args, om.model.spec, kv);  // bad --kv-scales fails before any step
  set_kv_format(om, kv, choice);
  return om;
}

OpenedModel open_model(const std::string& model_dir, const EngineArgs& args,
                       const BackendChoice& choice, const CacheRequest& kv, bool quiet) {
  OpenedModel om = load_on_backend(model_dir, args, choice, quiet);
  set_kv_format(om, kv, choice);
  return om;
}

void kv_format(const EngineArgs& a, const ModelSpec& spec, CacheRequest& c) {
  c.kv_dtype = a.kv_dtype == "fp8"    ? KvDType::FP8
               : a.kv_dtype == "bf16" ? KvDType::BF16
                                      : KvDType::Auto;
  c.kv_scales = KvScales{};
  if (a.kv_scales.empty()) return;
  LOOM_CHECK(c.kv_dtype == KvDType::FP8, "--kv-scales ", a.kv_scales,
             ": scales apply to an fp8 KV cache; pass --kv-dtype fp8 too");
  c.kv_scales = read_kv_scales(a.kv_scales, spec.layers, spec.kv_heads);
}

EngineOptions engine_options(const EngineArgs& a, const OpenedModel& om) {
  EngineOptions o;
  o.cache.kv_dtype = om.kv_cache.kv_dtype;
  o.cache.kv_scales = om.kv_cache.kv_scales;
  o.scheduler.max_seqs = a.max_seqs;
  o.scheduler.max_batch_slots = a.max_batch_slots;
  o.scheduler.prefix_sharing = !a.no_prefix_sharing;
  o.pipeline = !a.no_overlap;
  o.cache.block_size = a.block_size > 0 ? a.block_size : om.backend->default_block_size();
  o.cache.num_blocks = a.kv_blocks;
  o.cache.gpu_memory_fraction = a.gpu_memory_fraction;
  o.cache.host_cache_gib = a.kv_cache_gib;
  return o;
}

namespace {

void add_engine_options(const EngineArgs& e, nlohmann::ordered_json& j) {
  j["backend"] = e.backend;
  j["dtype"] = e.dtype;
  j["device"] = e.device;
  j["max_seqs"] = e.max_seqs;
  j["max_batch_slots"] = e.max_batch_slots;
  j["block_size"] = e.block_size;
  j["kv_blocks"] = e.kv_blocks;
  j["gpu_memory_fraction"] = e.gpu_memory_fraction;
  j["kv_cache_gib"] = e.kv_cache_gib;
  j["no_prefix_sharing"] = e.no_prefix_sharing;
  j["no_overlap"] = e.no_overlap;
  j["megakernel"] = e.megakernel;
  j["batch_invariant"] = e.batch_invariant;
  j["model_table"] = e.model_table;
  j["kv_dtype"] = e.kv_dtype;
  j["kv_scales"] = e.kv_scales;
}

}  // namespace

nlohmann::ordered_json options_json(const RunArgs& a) {
  nlohmann::ordered_json j;
  j["model"] = a.model;
  j["jobs"] = a.jobs;
  j["out"] = a.out;
  j["report"] = a.report;
  j["tokens_out"] = a.tokens_out;
  j["samples_per_file"] = a.samples_per_file;
  j["file_seconds"] = a.file_seconds;
  j["no_tokens_in_results"] = a.no_tokens_in_results;
  j["no_dataset_actions"] = a.no_dataset_actions;
  j["no_dataset_context"] = a.no_dataset_context;
  j["placeholder_id"] = a.placeholder_id;
  j["overlap"] = a.overlap;
  j["resume"] = a.resume;
  j["overwrite"] = a.overwrite;
  j["no_lock"] = a.no_lock;
  j["shard"] = a.shard;
  j["progress_interval"] = a.progress_interval;
  j["quiet"] = a.quiet;
  j["log_format"] = a.log_format;
  j["sampling"] = {{"seed", a.sampling.seed},
                   {"temperature", a.sampling.temperature},
                   {"top_k", a.sampling.top_k},
                   {"top_p", a.sampling.top_p}};
  add_engine_options(a.engine, j);
  return j;
}

nlohmann::ordered_json options_json(const BenchArgs& a) {
  nlohmann::ordered_json j;
  j["model"] = a.model;
  j["json"] = a.json_out;
  j["context_frames"] = a.context_frames;
  j["frames"] = a.frames;
  j["batch_sizes"] = a.batch_sizes;
  j["num_jobs"] = a.num_jobs;
  j["shared_group"] = a.shared_group;
  j["shared_only"] = a.shared_only;
  j["repeats"] = a.repeats;
  j["profile"] = a.profile;
  add_engine_options(a.engine, j);
  return j;
}

void describe_backend(OpenedModel& om, RunProvenance& p) {
  const DeviceInfo d = om.backend->device_info();
  p.backend = om.backend_name;
  p.weight_dtype = om.dtype_name;  // weight matrices are kept in the compute dtype
  p.kv_dtype = om.kv_dtype;        // the pool is not allocated yet: what it will hold
  p.kv_scales = om.kv_scales_source;
  p.device = d.name;
  p.driver = d.driver;
  p.cuda_runtime = d.cuda_runtime;
}

nlohmann::ordered_json bench_provenance(const BenchArgs& a, OpenedModel& om) {
  RunProvenance p;
  p.started_utc = format_utc(process_start_time());
  p.host = host_name();
  p.argv = process_argv();
  p.options = options_json(a);
  p.shard_source = "unsharded";
  const ModelIdentity mid = model_identity(a.model, a.engine.model_table);
  p.model_path = a.model;
  p.architecture = mid.architecture;
  p.config_hash = mid.fingerprint;
  describe_backend(om, p);
  nlohmann::ordered_json block = provenance_json(p);
  set_run_provenance(block);
  return block;
}

}  // namespace loom
