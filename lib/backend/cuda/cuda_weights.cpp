// load(): checkpoint tensors (host views, often mmap'd safetensors) to the device. One device
// arena holds every weight. Bytes travel through pinned staging buffers in 32 MiB chunks, two
// host threads each driving its own stream with two buffers, so the host copy into pinned
// memory, the PCIe transfer and (when the dtype changes) the conversion kernel overlap.
// Weight matrices keep bf16 as is (ComputeDType::BF16) or become fp32 (F32); norms, position
// tables, the first action layer and biases are fp32 on the device.
#include <chrono>
#include <cstring>
#include <exception>
#include <thread>

#include "backend/cuda/cuda_backend_impl.h"
#include "kernels/activation.cuh"
#include "kernels/cuda_check.cuh"

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

// The features the CUDA forward pass implements (cuda_forward.cpp): Llama's RMSNorm with a
// scale, SwiGLU with silu, no biases, RoPE, learned spatio-temporal positions or none, action
// rows through a Linear or an MLP, the whole vocab sampled. Anything else is refused at load,
// naming the feature, rather than computed wrongly; the cpu backend implements them all.
std::string unsupported_feature(const ModelSpec& s) {
  if (s.norm != NormKind::Rms) return "norm \"layer\" (LayerNorm)";
  if (!s.norm_affine) return "norm_affine false (norms without a scale)";
  if (s.mlp != MlpKind::SwiGlu) return "mlp \"plain\"";
  if (s.act != Activation::Silu) return "an MLP activation other than silu";
  if (s.qkv_bias) return "qkv_bias";
  if (s.o_bias) return "o_bias";
  if (s.mlp_bias) return "mlp_bias";
  if (!s.rotary) return "rotary false";
  if (s.positions == PositionKind::Absolute) return "learned_positions \"absolute\"";
  if (s.action_projection == ActionProjection::Tokens) return "action_projection \"tokens\"";
  if (s.logit_end > 0) return "a logit range (logit_begin / logit_end)";
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

}  // namespace

// Lays out every weight in one arena (pointers in w_), from the spec alone.
void CudaBackend::alloc_weight_arena(const ModelSpec& s) {
  const size_t ts = dtype_size(t_);
  const size_t H = size_t(s.hidden), V = size_t(s.vocab), I = size_t(s.intermediate);
  size_t off = 0;
  std::vector<std::pair<void**, size_t>> slots;
  auto take = [&](void** p, size_t bytes) { slots.push_back({p, off}), off += align_up(bytes); };
  w_ = DeviceWeights{};
  w_.layers.resize(size_t(s.layers));
  // embed and lm_head get zero rows up to a multiple of 64 (vocab_rows()): the batched lm_head
  // GEMM then has aligned dimensions (cuBLAS is ~4x slower at n = 262145 than at 262208).
  const size_t Vp = size_t(vocab_rows(s.vocab));
  take(&w_.embed, Vp * H * ts);
  if (!s.tied_lm_head) take(&w_.lm_head, Vp * H * ts);
  take(reinterpret_cast<void**>(&w_.final_norm), H * 4);
  if (s.positions == PositionKind::SpatioTemporal) {
    take(reinterpret_cast<void**>(&w_.pos_spatial), size_t(s.spatial_rows) * H * 4);
    take(reinterpret_cast<void**>(&w_.pos_temporal), size_t(s.temporal_rows) * H * 4);
  }
  for (DeviceLayer& L : w_.layers) {
    take(&L.qkv, size_t(s.q_dim() + 2 * s.kv_dim()) * H * ts);
    take(&L.o, H * size_t(s.q_dim()) * ts);
    take(&L.gate_up, 2 * I * H * ts);
    take(&L.down, H * I * ts);
    take(reinterpret_cast<void**>(&L.attn_norm), H * 4);
    take(reinterpret_cast<void**>(&L.mlp_norm), H * 4);
  }
  const int n_action = s.action_layers();
  w_.action_w.assign(size_t(std::max(0, n_action - 1)), nullptr);
  w_.action_b.assign(size_t(n_action), nullptr);
  if (n_action > 0) take(reinterpret_cast<void**>(&w_.action_w0), H * size_t(s.action_dim) * 4);
  for (auto& p : w_.action_w) take(&p, H * H * ts);
  for (auto& p : w_.action_b) take(reinterpret_cast<void**>(&p), H * 4);
  char* base = static_cast<char*>(dev_alloc(off));
  LOOM_CUDA_CHECK(cudaMemset(base, 0, off));  // the padding rows stay zero
  for (auto& [p, o] : slots) *p = base + o;
  if (s.tied_lm_head) w_.lm_head = w_.embed;
  w_.bytes = off;
  w_.streamed_bytes = off - align_up(Vp * H * ts);  // a decode step reads all but embed
  if (s.tied_lm_head) w_.streamed_bytes += align_up(Vp * H * ts);
}

static void check_shape(const Tensor& t, std::vector<int64_t> shape, const char* role) {
  LOOM_CHECK(!t.empty(), "CUDA backend: weight '", role, "' missing");
  LOOM_CHECK(t.shape == shape, "CUDA backend: weight '", role, "': expected ", shape_str(shape),
             ", found ", shape_str(t.shape));
  LOOM_CHECK(t.dtype == DType::F32 || t.dtype == DType::BF16 || t.dtype == DType::F16,
             "CUDA backend: weight '", role, "' has dtype ", dtype_name(t.dtype),
             " (expected f32, bf16 or f16)");
}

void CudaBackend::load(const ModelSpec& s, const Weights& wt) {
  const auto t0 = std::chrono::steady_clock::now();
  LOOM_CHECK(s.hidden > 0 && s.layers > 0 && s.heads > 0 && s.kv_heads > 0 && s.head_dim > 0 &&
                 s.vocab > 0 && s.intermediate > 0,
             "CUDA backend: incomplete model spec");
  check_supported(s);
  const int64_t H = s.hidden, V = s.vocab, I = s.intermediate;
  const int64_t qkv = s.q_dim() + 2 * s.kv_dim();
  LOOM_CHECK(int64_t(wt.layers.size()) == s.layers, "CUDA backend: ", wt.layers.size(),
             " layers of weights, spec has ", s.layers);
  spec_ = s;
  spec_.tied_lm_head = s.tied_lm_head || wt.lm_head.data == wt.embed.data;
  free_graphs();
  alloc_weight_arena(spec_);

  std::vector<UploadJob> jobs;
  bool convert = false;
  auto add = [&](const Tensor& t, std::vector<int64_t> shape, const char* role, void* dst,
                 DType dst_t) {
    check_shape(t, std::move(shape), role);
    jobs.push_back(
        {static_cast<const char*>(t.data), t.nbytes(), t.dtype, static_cast<char*>(dst), dst_t});
    convert |= t.dtype != dst_t;
  };
  add(wt.embed, {V, H}, "embed", w_.embed, t_);
  if (!spec_.tied_lm_head) add(wt.lm_head, {V, H}, "lm_head", w_.lm_head, t_);
  add(wt.final_norm, {H}, "final_norm", w_.final_norm, DType::F32);
  if (s.positions == PositionKind::SpatioTemporal) {
    add(wt.pos_spatial, {s.spatial_rows, H}, "pos.spatial", w_.pos_spatial, DType::F32);
    add(wt.pos_temporal, {s.temporal_rows, H}, "pos.temporal", w_.pos_temporal, DType::F32);
  }
  for (int l = 0; l < s.layers; l++) {
    const LayerWeights& L = wt.layers[size_t(l)];
    DeviceLayer& D = w_.layers[size_t(l)];
    add(L.qkv, {qkv, H}, "layer.qkv", D.qkv, t_);
    add(L.o, {H, s.q_dim()}, "layer.o", D.o, t_);
    add(L.gate_up, {2 * I, H}, "layer.gate_up", D.gate_up, t_);
    add(L.down, {H, I}, "layer.down", D.down, t_);
    add(L.attn_norm, {H}, "layer.attn_norm", D.attn_norm, DType::F32);
    add(L.mlp_norm, {H}, "layer.mlp_norm", D.mlp_norm, DType::F32);
  }
  LOOM_CHECK(wt.action.size() == w_.action_b.size(), "CUDA backend: ", wt.action.size(),
             " action layers, spec expects ", w_.action_b.size());
  for (size_t l = 0; l < wt.action.size(); l++) {
    if (l == 0)
      add(wt.action[0].weight, {H, s.action_dim}, "action.0.weight", w_.action_w0, DType::F32);
    else
      add(wt.action[l].weight, {H, H}, "action.weight", w_.action_w[l - 1], t_);
    add(wt.action[l].bias, {H}, "action.bias", w_.action_b[l], DType::F32);
  }
  {
    Uploader up(convert);
    up.run(jobs);
  }
  after_load();
  LOOM_CUDA_CHECK(cudaDeviceSynchronize());
  load_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void CudaBackend::load_random(const ModelSpec& s, uint64_t seed) {
  const auto t0 = std::chrono::steady_clock::now();
  check_supported(s);
  spec_ = s;
  free_graphs();
  alloc_weight_arena(spec_);
  const size_t H = size_t(s.hidden), I = size_t(s.intermediate);
  uint64_t k = seed;
  auto fill = [&](void* p, DType t, size_t n, float scale) {
    LOOM_KERNEL(fill_uniform(t, p, n, ++k, scale, stream_));
  };
  const std::vector<float> ones(std::max(H, size_t(1)), 1.0f);
  auto set_ones = [&](float* p) {
    LOOM_CUDA_CHECK(cudaMemcpy(p, ones.data(), H * 4, cudaMemcpyHostToDevice));
  };
  fill(w_.embed, t_, size_t(s.vocab) * H, 1.0f);
  if (!spec_.tied_lm_head) fill(w_.lm_head, t_, size_t(s.vocab) * H, 1.0f / std::sqrt(float(H)));
  set_ones(w_.final_norm);
  if (s.positions == PositionKind::SpatioTemporal) {
    fill(w_.pos_spatial, DType::F32, size_t(s.spatial_rows) * H, 0.1f);
    fill(w_.pos_temporal, DType::F32, size_t(s.temporal_rows) * H, 0.1f);
  }
  for (DeviceLayer& L : w_.layers) {
    fill(L.qkv, t_, size_t(s.q_dim() + 2 * s.kv_dim()) * H, 1.0f / std::sqrt(float(H)));
    fill(L.o, t_, H * size_t(s.q_dim()), 1.0f / std::sqrt(float(s.q_dim())));
    fill(L.gate_up, t_, 2 * I * H, 1.0f / std::sqrt(float(H)));
    fill(L.down, t_, H * I, 1.0f / std::sqrt(float(I)));
    set_ones(L.attn_norm);
    set_ones(L.mlp_norm);
  }
  if (w_.action_w0) fill(w_.action_w0, DType::F32, H * size_t(s.action_dim), 0.5f);
  for (void* p : w_.action_w) fill(p, t_, H * H, 1.0f / std::sqrt(float(H)));
  for (float* p : w_.action_b) fill(p, DType::F32, H, 0.1f);
  after_load();
  LOOM_CUDA_CHECK(cudaDeviceSynchronize());
  load_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace loom::gpu
