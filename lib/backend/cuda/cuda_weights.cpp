// load(): checkpoint tensors (host views, often mmap'd safetensors) to the device. One device
// arena holds every weight. Bytes travel through pinned staging buffers in 32 MiB chunks, two
// host threads each driving its own stream with two buffers, so the host copy into pinned
// memory, the PCIe transfer and (when the dtype changes) the conversion kernel overlap.
// Which weights go up, their shapes and device dtypes come from the roles table (model/roles.h):
// weight matrices keep bf16 as is (ComputeDType::BF16) or become fp32 (F32); norms, position
// tables, the first action layer and biases are fp32 on the device.
#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>
#include <thread>

#include "backend/cuda/cuda_backend_impl.h"
#include "kernels/activation.cuh"
#include "kernels/attention.cuh"
#include "kernels/cuda_check.cuh"
#include "model/roles.h"

namespace loom::gpu {

namespace {

constexpr size_t kChunk = size_t(32) << 20;

struct UploadJob {
  const char* src;  // host bytes
  size_t bytes;     // source bytes
  DType src_t;
  char* dst;  // device destination of element 0
  DType dst_t;
};

class Uploader {
 public:
  explicit Uploader(bool convert) : convert_(convert) {
    for (int w = 0; w < 2; w++) {
      LOOM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_[w], cudaStreamNonBlocking));
      for (int b = 0; b < 2; b++) {
        LOOM_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&pinned_[w][b]), kChunk));
        LOOM_CUDA_CHECK(cudaEventCreateWithFlags(&done_[w][b], cudaEventDisableTiming));
        LOOM_CUDA_CHECK(cudaEventRecord(done_[w][b], stream_[w]));
        if (convert_) LOOM_CUDA_CHECK(cudaMalloc(&stage_[w][b], kChunk));
      }
    }
  }
  ~Uploader() {
    for (int w = 0; w < 2; w++) {
      cudaStreamSynchronize(stream_[w]);
      for (int b = 0; b < 2; b++) {
        cudaFreeHost(pinned_[w][b]);
        cudaEventDestroy(done_[w][b]);
        if (stage_[w][b]) cudaFree(stage_[w][b]);
      }
      cudaStreamDestroy(stream_[w]);
    }
  }

  void run(const std::vector<UploadJob>& jobs) {
    struct Chunk {
      const UploadJob* job;
      size_t offset, bytes;
    };
    std::vector<Chunk> chunks;
    for (const UploadJob& j : jobs)
      for (size_t off = 0; off < j.bytes; off += kChunk)
        chunks.push_back({&j, off, std::min(kChunk, j.bytes - off)});
    std::exception_ptr err[2];
    auto worker = [&](int w) {
      try {
        LOOM_CUDA_CHECK(cudaSetDevice(device_));
        int use = 0;
        for (size_t c = size_t(w); c < chunks.size(); c += 2, use ^= 1) {
          const Chunk& ch = chunks[c];
          LOOM_CUDA_CHECK(cudaEventSynchronize(done_[w][use]));
          std::memcpy(pinned_[w][use], ch.job->src + ch.offset, ch.bytes);
          const size_t ss = dtype_size(ch.job->src_t), ds = dtype_size(ch.job->dst_t);
          char* dst = ch.job->dst + ch.offset / ss * ds;
          if (ch.job->src_t == ch.job->dst_t) {
            LOOM_CUDA_CHECK(cudaMemcpyAsync(dst, pinned_[w][use], ch.bytes, cudaMemcpyHostToDevice,
                                            stream_[w]));
          } else {
            LOOM_CUDA_CHECK(cudaMemcpyAsync(stage_[w][use], pinned_[w][use], ch.bytes,
                                            cudaMemcpyHostToDevice, stream_[w]));
            LOOM_KERNEL(convert(ch.job->src_t, stage_[w][use], ch.job->dst_t, dst, ch.bytes / ss,
                                stream_[w]));
          }
          LOOM_CUDA_CHECK(cudaEventRecord(done_[w][use], stream_[w]));
        }
        LOOM_CUDA_CHECK(cudaStreamSynchronize(stream_[w]));
      } catch (...) {
        err[w] = std::current_exception();
      }
    };
    LOOM_CUDA_CHECK(cudaGetDevice(&device_));
    std::thread t1(worker, 1);
    worker(0);
    t1.join();
    for (auto& e : err)
      if (e) std::rethrow_exception(e);
  }

 private:
  bool convert_;
  int device_ = 0;
  cudaStream_t stream_[2]{};
  char* pinned_[2][2]{};
  void* stage_[2][2]{};
  cudaEvent_t done_[2][2]{};
};

// The features the CUDA forward pass implements (cuda_forward.cpp): RMSNorm (with or without
// a scale) or LayerNorm (affine with or without a bias, or neither); SwiGLU with any activation
// or the plain MLP; biases on q/k/v, o and the MLP; RoPE on or off; learned absolute or
// spatio-temporal positions or none; action rows through a Linear or an MLP, or action ids in
// the frame; a logit range for the draw. Anything else is refused at load, naming the feature,
// rather than computed wrongly; the cpu backend implements them all.
std::string unsupported_feature(const ModelSpec& s) {
  if (s.head_dim != 16 && s.head_dim != 64 && s.head_dim != 128)
    return cat("head_dim ", s.head_dim, " (the attention kernels are built for 16, 64 and 128)");
  if (s.heads % s.kv_heads != 0 || s.heads / s.kv_heads > kAttnRows)
    return cat("a GQA ratio of ", s.heads, " / ", s.kv_heads, " heads (at most ", kAttnRows, ")");
  if (s.norm_bias && !(s.norm == NormKind::Layer && s.norm_affine))
    return "norm_bias without an affine LayerNorm";
  if (s.vocab > kSampleMaxVocab)
    return cat("a vocabulary of ", s.vocab, " (the device draw takes at most ", kSampleMaxVocab,
               ")");
  if (s.logit_end > 0 &&
      !(s.logit_begin >= 0 && s.logit_begin < s.logit_end && s.logit_end <= s.vocab))
    return "a logit range outside the vocabulary";
  return "";
}

void check_supported(const ModelSpec& s) {
  const std::string f = unsupported_feature(s);
  LOOM_CHECK(f.empty(), "CUDA backend: ", s.table.empty() ? std::string("the model") : s.table,
             " uses ", f, ", which the CUDA backend does not implement; run it with --backend cpu");
}

size_t align_up(size_t n) {
  return (n + 255) / 256 * 256;
}

// Calls f(def, layer, j, name) for every role instance the spec needs, in arena order: the
// model-wide roles, then layer by layer (a layer's weights stay together), then the action
// layers. layer is -1 for roles bound once.
template <class F>
void for_each_role(const ModelSpec& s, F&& f) {
  std::vector<std::pair<const RoleDef*, int>> once, per_layer;
  for (const std::string& role : needed_roles(s)) {
    int j = 0;
    const RoleDef* d = find_role(role, &j);
    (d->per_layer ? per_layer : once).push_back({d, j});
  }
  for (const auto& [d, j] : once)
    if (d->where != Slot::ActionWeight && d->where != Slot::ActionBias) f(*d, -1, j);
  for (int l = 0; l < s.layers; l++)
    for (const auto& [d, j] : per_layer) f(*d, l, j);
  for (const auto& [d, j] : once)
    if (d->where == Slot::ActionWeight || d->where == Slot::ActionBias) f(*d, -1, j);
}

// embed and lm_head get zero rows up to a multiple of 64 (vocab_rows()): the batched lm_head
// GEMM then has aligned dimensions (cuBLAS is ~4x slower at n = 262145 than at 262208).
bool vocab_padded(const RoleDef& d) {
  return d.where == Slot::Embed || d.where == Slot::LmHead;
}

size_t device_elements(const ModelSpec& s, const RoleDef& d, int j) {
  std::vector<int64_t> shape = d.shape(s, j);
  if (vocab_padded(d)) shape[0] = vocab_rows(s.vocab);
  size_t n = 1;
  for (int64_t x : shape) n *= size_t(x);
  return n;
}

}  // namespace

// Lays out every weight the spec's features need in one arena (model/roles.h), from the spec
// alone.
void CudaBackend::alloc_weight_arena(const ModelSpec& s) {
  size_t off = 0;
  std::vector<std::pair<DeviceTensor*, size_t>> slots;
  w_ = DeviceWeights{};
  w_.layers.resize(size_t(s.layers));
  w_.action.resize(size_t(s.action_layers()));
  size_t embed_bytes = 0;
  for_each_role(s, [&](const RoleDef& d, int layer, int j) {
    if (d.where == Slot::LmHead && s.tied_lm_head) return;
    DeviceTensor* t = d.slot(w_, layer, j);
    t->dtype = d.device_dtype(t_, j);
    const size_t bytes = device_elements(s, d, j) * dtype_size(t->dtype);
    if (d.where == Slot::Embed) embed_bytes = align_up(bytes);
    slots.push_back({t, off});
    off += align_up(bytes);
  });
  char* base = static_cast<char*>(dev_alloc(off));
  LOOM_CUDA_CHECK(cudaMemset(base, 0, off));  // the padding rows stay zero
  for (auto& [t, o] : slots) t->data = base + o;
  if (s.tied_lm_head) w_.lm_head = w_.embed;
  w_.bytes = off;
  w_.streamed_bytes = off - embed_bytes;  // a decode step reads all but embed
  if (s.tied_lm_head) w_.streamed_bytes += embed_bytes;
}

void CudaBackend::load(const ModelSpec& s, const Weights& wt) {
  const auto t0 = std::chrono::steady_clock::now();
  LOOM_CHECK(s.hidden > 0 && s.layers > 0 && s.heads > 0 && s.kv_heads > 0 && s.head_dim > 0 &&
                 s.vocab > 0 && s.intermediate > 0,
             "CUDA backend: incomplete model spec");
  check_supported(s);
  check_weights(s, wt, "CUDA backend");  // every role the features need, of loom's shape
  spec_ = s;
  spec_.tied_lm_head = s.tied_lm_head || wt.lm_head.data == wt.embed.data;
  free_graphs();
  alloc_weight_arena(spec_);

  std::vector<UploadJob> jobs;
  bool convert = false;
  Weights& host = const_cast<Weights&>(wt);  // slot() serves the loader too; only read here
  for_each_role(spec_, [&](const RoleDef& d, int layer, int j) {
    if (d.where == Slot::LmHead && spec_.tied_lm_head) return;
    const Tensor& t = *d.slot(host, layer, j);
    const DeviceTensor& dst = *d.slot(w_, layer, j);
    LOOM_CHECK(t.dtype == DType::F32 || t.dtype == DType::BF16 || t.dtype == DType::F16,
               "CUDA backend: weight ", d.name, layer >= 0 ? cat(" of layer ", layer) : "",
               " has dtype ", dtype_name(t.dtype), " (expected f32, bf16 or f16)");
    jobs.push_back({static_cast<const char*>(t.data), t.nbytes(), t.dtype,
                    static_cast<char*>(dst.data), dst.dtype});
    convert |= t.dtype != dst.dtype;
  });
  {
    Uploader up(convert);
    up.run(jobs);
  }
  after_load();
  LOOM_CUDA_CHECK(cudaDeviceSynchronize());
  load_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Random weights of the spec's roles (synthetic benchmarks): norm scales 1, biases and position
// tables uniform(±0.1), the first action layer uniform(±0.5), embed uniform(±1), every other
// matrix uniform(±1/sqrt(in)).
void CudaBackend::load_random(const ModelSpec& s, uint64_t seed) {
  const auto t0 = std::chrono::steady_clock::now();
  check_supported(s);
  spec_ = s;
  free_graphs();
  alloc_weight_arena(spec_);
  uint64_t k = seed;
  const std::vector<float> ones(size_t(s.hidden), 1.0f);
  for_each_role(spec_, [&](const RoleDef& d, int layer, int j) {
    if (d.where == Slot::LmHead && spec_.tied_lm_head) return;
    const DeviceTensor& t = *d.slot(w_, layer, j);
    const std::vector<int64_t> shape = d.shape(s, j);
    size_t n = 1;
    for (int64_t x : shape) n *= size_t(x);
    const bool norm_scale =
        d.where == Slot::FinalNorm || d.where == Slot::AttnNorm || d.where == Slot::MlpNorm;
    if (norm_scale) {
      LOOM_CUDA_CHECK(cudaMemcpy(t.data, ones.data(), n * 4, cudaMemcpyHostToDevice));
      return;
    }
    const bool matrix = d.device_dtype(DType::BF16, j) == DType::BF16;  // roles.h: GEMM operands
    float scale = 0.1f;  // vectors and position tables
    if (d.where == Slot::Embed)
      scale = 1.0f;
    else if (d.where == Slot::ActionWeight && j == 0)
      scale = 0.5f;
    else if (matrix)
      scale = 1.0f / std::sqrt(float(shape[1]));
    LOOM_KERNEL(fill_uniform(t.dtype, t.data, n, ++k, scale, stream_));
  });
  after_load();
  LOOM_CUDA_CHECK(cudaDeviceSynchronize());
  load_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace loom::gpu
