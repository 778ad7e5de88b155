#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/mega_schedule.h"
#include "kernels/activation.cuh"
#include "kernels/attention.cuh"
#include "kernels/cuda_check.cuh"
#include "kernels/rope.h"

namespace loom {

int cuda_device_count(std::string* reason) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (reason) *reason = cat("cudaGetDeviceCount: ", cudaGetErrorString(e));
    cudaGetLastError();
    return 0;
  }
  if (n == 0 && reason) *reason = "cudaGetDeviceCount found 0 devices";
  return n;
}

std::unique_ptr<Backend> make_cuda_backend(ComputeDType dtype, int device, bool batch_invariant) {
  // f32 would need fixed-order f32 linear layers; cuBLAS f32 happened to be invariant in the
  // probe (bench/results/2026-11-22-h200-batch-invariance-probe.json) but promises nothing.
  LOOM_CHECK(!batch_invariant || dtype == ComputeDType::BF16,
             "--batch-invariant on the cuda backend needs --dtype bf16 (its fixed-order linear "
             "layers are bf16); the cpu backend (f32) is always batch-invariant");
  std::string reason;
  const int n = cuda_device_count(&reason);
  LOOM_CHECK(n > 0, "CUDA backend: no CUDA device (", reason, ")");
  LOOM_CHECK(device >= 0 && device < n, "CUDA backend: device ", device, " requested, ", n,
             " present");
  return std::make_unique<gpu::CudaBackend>(dtype, device, batch_invariant);
}

static gpu::CudaBackend& as_cuda(Backend& b) {
  auto* c = dynamic_cast<gpu::CudaBackend*>(&b);
  LOOM_CHECK(c != nullptr, "expected a CUDA backend, found '", b.name(), "'");
  return *c;
}

void cuda_load_random_weights(Backend& backend, const ModelSpec& spec, uint64_t seed) {
  as_cuda(backend).load_random(spec, seed);
}

void cuda_fill_cache_random(Backend& backend, uint64_t seed) {
  as_cuda(backend).fill_cache_random(seed);
}

double cuda_time_graph_replay(Backend& backend, int n_seqs, int iters) {
  return as_cuda(backend).time_graph_replay(n_seqs, iters);
}

void cuda_set_debug_skip(Backend& backend, int mask) {
  as_cuda(backend).set_debug_skip(mask);
}

void cuda_set_megakernel(Backend& backend, MegakernelMode mode) {
  as_cuda(backend).set_megakernel_mode(mode);
}

static const gpu::CudaBackend& as_cuda(const Backend& b) {
  auto* c = dynamic_cast<const gpu::CudaBackend*>(&b);
  LOOM_CHECK(c != nullptr, "expected a CUDA backend, found '", b.name(), "'");
  return *c;
}

int64_t cuda_megakernel_steps(const Backend& backend) {
  return as_cuda(backend).megakernel_steps();
}

int64_t cuda_chunk_graph_steps(const Backend& backend) {
  return as_cuda(backend).chunk_graph_steps();
}

int64_t cuda_shared_kv_steps(const Backend& backend) {
  return as_cuda(backend).shared_kv_steps();
}

int64_t cuda_group_kv_steps(const Backend& backend) {
  return as_cuda(backend).group_kv_steps();
}

MegakernelTrace cuda_megakernel_trace(const Backend& backend) {
  return as_cuda(backend).megakernel_trace();
}

std::string cuda_megakernel_refusal(const Backend& backend) {
  return as_cuda(backend).megakernel_refusal();
}

void cuda_set_megakernel_debug(Backend& backend, const MegakernelDebug& debug) {
  as_cuda(backend).set_megakernel_debug(debug);
}

double cuda_last_load_seconds(const Backend& backend) {
  return as_cuda(backend).last_load_seconds();
}

}  // namespace loom

namespace loom::gpu {

constexpr size_t kMaxPartBlocks = 8192;  // attention partial buffers: blocks × splits

void StepLayout::compute() {
  size_t off = 0;
  auto take = [&](size_t n) {
    const size_t o = off;
    off += (n + 15) / 16 * 16;
    return o;
  };
  tokens = take(4 * size_t(n_slots));
  positions = take(4 * size_t(n_slots));
  cache_slot = take(4 * size_t(n_slots));
  act_row = take(4 * size_t(n_slots));
  act_slots = take(4 * size_t(n_act));
  actions = take(n_act > 0 ? 4 * size_t(n_slots) * action_dim : 0);
  slot_start = take(4 * size_t(n_seqs + 1));
  kv_len = take(4 * size_t(n_seqs));
  block_tables = take(4 * size_t(n_seqs) * bt_stride);
  tiles = take(12 * size_t(n_tiles));
  out_rows = take(4 * size_t(n_out));
  params = take(sizeof(SampleParamsDev) * size_t(n_out));
  bytes = off;
}

CudaBackend::CudaBackend(ComputeDType dtype, int device, bool batch_invariant)
    : cdtype_(dtype),
      t_(dtype == ComputeDType::F32 ? DType::F32 : DType::BF16),
      invariant_(batch_invariant),
      device_(device) {
  kv_t_ = t_;
  LOOM_CUDA_CHECK(cudaSetDevice(device_));
  cudaDeviceProp prop{};
  LOOM_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
  LOOM_CHECK(prop.major >= 9, "CUDA backend: device ", device_, " (", prop.name,
             ") has compute capability ", prop.major, ".", prop.minor,
             "; this build targets sm_90a (Hopper)");
  num_sms_ = prop.multiProcessorCount;
  device_name_ = prop.name;
  device_memory_ = prop.totalGlobalMem;
  LOOM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  gemm_.init(stream_);
  for (int i = 0; i < 2; i++) {
    LOOM_CUDA_CHECK(cudaEventCreateWithFlags(&in_copied_[size_t(i)], cudaEventDisableTiming));
    LOOM_CUDA_CHECK(cudaEventCreateWithFlags(&step_done_[size_t(i)], cudaEventDisableTiming));
    for (cudaEvent_t& e : timing_ev_[size_t(i)]) LOOM_CUDA_CHECK(cudaEventCreate(&e));
  }
}

CudaBackend::~CudaBackend() {
  cudaStreamSynchronize(stream_);
  free_graphs();
  for (void* p : workspace_allocs_) cudaFree(p);
  for (void* p : allocs_) cudaFree(p);
  if (tokens_) cudaFree(tokens_);
  for (int i = 0; i < 2; i++) {
    if (in_host_[size_t(i)]) cudaFreeHost(in_host_[size_t(i)]);
    if (tokens_host_[size_t(i)]) cudaFreeHost(tokens_host_[size_t(i)]);
    if (mega_header_host_[size_t(i)]) cudaFreeHost(mega_header_host_[size_t(i)]);
    for (cudaEvent_t e : {in_copied_[size_t(i)], step_done_[size_t(i)], timing_ev_[size_t(i)][0],
                          timing_ev_[size_t(i)][1]})
      if (e) cudaEventDestroy(e);
  }
  for (auto& e : event_pool_) cudaEventDestroy(e);
  for (auto& p : prof_open_) {
    cudaEventDestroy(p.second[0]);
    cudaEventDestroy(p.second[1]);
  }
  if (stream_) cudaStreamDestroy(stream_);
}

void* CudaBackend::dev_alloc(size_t bytes) {
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, std::max<size_t>(bytes, 16));
  if (e != cudaSuccess) {
    cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    fail("CUDA backend: cannot allocate ", bytes, " bytes on ", device_name_, " (",
         cudaGetErrorString(e), "; ", free_b, " of ", total_b, " bytes free)");
  }
  allocs_.push_back(p);
  return p;
}

void CudaBackend::free_graphs() {
  for (auto& g : graphs_) {
    if (g != nullptr) cudaGraphExecDestroy(g);
    g = nullptr;
  }
  for (auto& [key, g] : chunk_graphs_)
    if (g != nullptr) cudaGraphExecDestroy(g);
  chunk_graphs_.clear();
  for (MegaBucket& m : mega_) {
    if (m.graph != nullptr) cudaGraphExecDestroy(m.graph);
    m.graph = nullptr;
  }
  last_graph_.fill(nullptr);
}

void CudaBackend::after_load() {
  if (invariant_) {
    const int ks[] = {spec_.hidden, spec_.q_dim(), spec_.intermediate};
    for (int k : ks)
      LOOM_CHECK(k % 8 == 0,
                 "CUDA backend: --batch-invariant needs hidden, q_dim and "
                 "intermediate multiples of 8 (16-byte rows for linear_fixed); found ",
                 k);
  }
  // inv_freq as HF computes it (rope.h); rotary off: zeros, so the RoPE kernels (and the decode
  // attention that fuses RoPE with the K/V write) serve as the plain K/V write.
  const std::vector<float> inv = rope_inv_freq(spec_.head_dim, spec_.rope_theta, spec_.rotary);
  inv_freq_ = static_cast<float*>(dev_alloc(inv.size() * 4));
  LOOM_CUDA_CHECK(cudaMemcpy(inv_freq_, inv.data(), inv.size() * 4, cudaMemcpyHostToDevice));
  norm_ones_ = nullptr;
  if (!spec_.norm_affine) {  // RMSNorm without a scale multiplies by 1, as cpu_backend does
    const std::vector<float> ones(size_t(spec_.hidden), 1.0f);
    norm_ones_ = static_cast<float*>(dev_alloc(ones.size() * 4));
    LOOM_CUDA_CHECK(cudaMemcpy(norm_ones_, ones.data(), ones.size() * 4, cudaMemcpyHostToDevice));
  }
  // A floor for callers without a step budget (tests, cuda_bench); the engine's allocate_cache
  // grows it to its largest step before it sizes the pool.
  ensure_workspace(2048, kMaxGraphBatch);
  // Whether decode steps of 1-8 sequences may take the megakernel (cuda_mega.cpp).
  mega_refusal_.clear();
  try {
    const mega::MegaSchedule s = mega::build_mega_schedule(spec_, mega::kMegaMaxBatch, num_sms_);
    int optin = 0;
    LOOM_CUDA_CHECK(
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device_));
    LOOM_CHECK(mega::mega_gemv_stages(s.dims, t_, optin, false, false) >= 2,
               "megakernel: ", mega::mega_smem_bytes(s.dims, t_, 2, false, false),
               " bytes of shared memory needed at 8 sequences, the device offers ", optin);
    mega_smem_optin_ = optin;
  } catch (const Error& e) {
    mega_refusal_ = e.what();
  }
  loaded_ = true;
}

void CudaBackend::ensure_workspace(int n_slots, int n_out) {
  if (n_slots <= cap_slots_ && n_out <= cap_out_) return;
  LOOM_CUDA_CHECK(cudaStreamSynchronize(stream_));
  free_graphs();
  for (void* p : workspace_allocs_) cudaFree(p);
  workspace_allocs_.clear();
  const int old_out = cap_out_;
  cap_slots_ = std::max(cap_slots_, n_slots);
  cap_out_ = std::max(cap_out_, n_out);
  const size_t ts = dtype_size(t_);
  const size_t H = size_t(spec_.hidden), S = size_t(cap_slots_), O = size_t(cap_out_);
  auto alloc = [&](size_t bytes) {
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, std::max<size_t>(bytes, 16));
    if (e != cudaSuccess) {
      // No buffer of the new size stands: the caps say so, and the next step allocates again.
      cudaGetLastError();
      for (void* q : workspace_allocs_) cudaFree(q);
      workspace_allocs_.clear();
      cap_slots_ = cap_out_ = 0;
      fail("CUDA backend: no memory on ", device_name_, " for the activations of a step of ", S,
           " slots and ", O, " output rows (--max-batch-slots, --max-seqs): ", bytes,
           " more bytes: ", cudaGetErrorString(e));
    }
    workspace_allocs_.push_back(p);
    return p;
  };
  x_ = static_cast<float*>(alloc(S * H * 4));
  h_ = alloc(S * H * ts);
  qkv_ = alloc(S * size_t(spec_.q_dim() + 2 * spec_.kv_dim()) * ts);
  attn_ = alloc(S * size_t(spec_.q_dim()) * ts);
  gu_ = alloc(S * size_t(2 * spec_.intermediate) * ts);
  act_ = alloc(S * size_t(spec_.intermediate) * ts);
  delta_ = alloc(S * H * ts);
  act_a_ = alloc(S * H * ts);
  act_b_ = alloc(S * H * ts);
  h_last_ = alloc(O * H * ts);
  logits_ld_ = vocab_rows(spec_.vocab);
  logits_ = static_cast<float*>(alloc(O * size_t(logits_ld_) * 4));
  logits_t_ = t_ == DType::BF16 ? alloc(O * size_t(logits_ld_) * 2) : nullptr;
  // The draws outlive the workspace: a step in flight is collected, and the next step takes
  // its futures, from them.
  if (cap_out_ > old_out) {
    int32_t* dev = nullptr;
    LOOM_CUDA_CHECK(cudaMalloc(&dev, O * 4));
    if (tokens_) {
      LOOM_CUDA_CHECK(cudaMemcpy(dev, tokens_, size_t(old_out) * 4, cudaMemcpyDeviceToDevice));
      cudaFree(tokens_);
    }
    tokens_ = dev;
    for (int32_t*& h : tokens_host_) {
      int32_t* grown = nullptr;
      LOOM_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&grown), O * 4));
      if (h) {
        std::memcpy(grown, h, size_t(old_out) * 4);
        cudaFreeHost(h);
      }
      h = grown;
    }
  }
  sample_ws_ = alloc(sample_workspace_bytes(cap_out_));
  // The CUDA-core kernels' split partials (fp32; 67 MB at head_dim 64); the tensor-core path
  // has part_mma_.
  part_o_ = attention_mma() ? nullptr
                            : static_cast<float*>(alloc(
                                  attention_partial_floats(kMaxPartBlocks, spec_.head_dim) * 4));
  part_ml_ = static_cast<float*>(alloc(kMaxPartBlocks * kAttnRows * 2 * 4));
}

size_t CudaBackend::kv_block_bytes(int block_size) const {
  return size_t(spec_.layers) * 2 * size_t(block_size) * size_t(spec_.kv_dim()) * dtype_size(kv_t_);
}

int CudaBackend::allocate_cache(const CacheRequest& request) {
  LOOM_CHECK(loaded_, "CUDA backend: allocate_cache before load");
  LOOM_CHECK(request.block_size > 0, "CUDA backend: block_size ", request.block_size);
  LOOM_CHECK(request.gpu_memory_fraction > 0 && request.gpu_memory_fraction <= 1,
             "CUDA backend: gpu_memory_fraction ", request.gpu_memory_fraction,
             " (expected in (0, 1])");
  if (kv_ != nullptr) {
    LOOM_CUDA_CHECK(cudaStreamSynchronize(stream_));
    free_graphs();
    dev_free(kv_);
  }
  block_size_ = request.block_size;
  mega_layers_kv_ = nullptr;  // the megakernel's layer table points into the pool (cuda_mega.cpp)
  max_bt_ = std::max(1, (std::max(spec_.max_positions, 1) + block_size_ - 1) / block_size_);
  set_kv_format(request);
  // The tensor-core decode partitions follow max_bt_: allocated here, before the pool takes
  // what is left (~123 MB for Terra: 256 x 4 x 57 x 8 x 66 floats).
  dev_free(part_mma_);
  dev_free(mma_counters_);
  part_mma_floats_ = 0;
  mma_counters_len_ = 0;
  if (attention_mma()) {
    part_mma_floats_ = attention_mma_partial_floats(kMaxGraphBatch, spec_.kv_heads, spec_.heads,
                                                    spec_.head_dim, max_bt_, block_size_);
    part_mma_ = static_cast<float*>(dev_alloc(part_mma_floats_ * 4));
    mma_counters_len_ = size_t(kMaxGraphBatch) * spec_.kv_heads;
    mma_counters_ = static_cast<int*>(dev_alloc(mma_counters_len_ * 4));
    LOOM_CUDA_CHECK(cudaMemset(mma_counters_, 0, mma_counters_len_ * 4));
  }
  if (request.step_slots > 0) {
    // The largest step's activations first (a graph step pads its rows up to the next bucket;
    // each sequence of a step has a slot, so no more output rows than slots): the pool then
    // leaves the reserve below for what it is for.
    const int outs = std::min(std::max(request.step_seqs, 1), request.step_slots);
    const int slots = int(std::min<int64_t>(int64_t(request.step_slots) + kMaxGraphBatch,
                                            std::numeric_limits<int>::max()));
    ensure_workspace(slots, outs);
  }
  const size_t per_block = kv_block_bytes(block_size_);
  int blocks = request.num_blocks;
  if (blocks <= 0) {
    size_t free_b = 0, total_b = 0;
    LOOM_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    const size_t used = total_b - free_b;
    const size_t allowed = size_t(double(total_b) * request.gpu_memory_fraction);
    const size_t reserve = size_t(256) << 20;  // graphs, cuBLAS, step inputs
    LOOM_CHECK(allowed > used + reserve + per_block,
               "CUDA backend: no memory left for the KV cache: ", used, " bytes in use of ",
               allowed, " allowed (gpu_memory_fraction ", request.gpu_memory_fraction, ")");
    blocks = int(std::min<size_t>((allowed - used - reserve) / per_block - 1, 1u << 30));
  }
  LOOM_CHECK(blocks > 0, "CUDA backend: num_blocks ", blocks);
  kv_bytes_ = per_block * (size_t(blocks) + 1);  // the extra block takes padded slots
  if (request.num_blocks > 0) {
    size_t free_b = 0, total_b = 0;
    LOOM_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    LOOM_CHECK(kv_bytes_ <= free_b, "--kv-blocks ", blocks, ": a KV pool of ", blocks,
               " + 1 blocks of ", per_block, " bytes needs ", kv_bytes_, " bytes; ", device_name_,
               " has ", free_b, " of ", total_b, " bytes free (expected at most ",
               std::max<size_t>(free_b / per_block, 1) - 1,
               " blocks, or leave --kv-blocks out to size the pool by --gpu-memory-fraction)");
  }
  kv_ = dev_alloc(kv_bytes_);
  num_blocks_ = blocks;
  size_t free_b = 0, total_b = 0;
  LOOM_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  peak_bytes_ = std::max(peak_bytes_, total_b - free_b);
  return num_blocks_;
}

// The pool's element type and the FP8 scales (on the device, per layer K then V).
void CudaBackend::set_kv_format(const CacheRequest& request) {
  free_graphs();  // captured with the previous format
  const KvDType k = request.kv_dtype;
  LOOM_CHECK(k != KvDType::BF16 || t_ == DType::BF16, "--kv-dtype bf16 with --dtype ",
             dtype_name(t_), " on the cuda backend: its KV cache is f32 or fp8 under f32 compute");
  kv_t_ = k == KvDType::FP8 ? DType::F8E4M3 : t_;
  dev_free(kv_scale_);
  if (k != KvDType::FP8) return;
  const KvScales ks =
      request.kv_scales.empty() ? KvScales::ones(spec_.layers, spec_.kv_heads) : request.kv_scales;
  ks.check_shape(spec_.layers, spec_.kv_heads);
  const std::vector<float> dev = ks.layer_rows();  // [layers, 2, kv_heads]
  kv_scale_ = static_cast<float*>(dev_alloc(dev.size() * 4));
  LOOM_CUDA_CHECK(cudaMemcpy(kv_scale_, dev.data(), dev.size() * 4, cudaMemcpyHostToDevice));
}

void CudaBackend::collect_kv_stats(const KvScales* saturation_scales) {
  LOOM_CHECK(loaded_, "CUDA backend: collect_kv_stats before load");
  LOOM_CHECK(kv_t_ != DType::F8E4M3,
             "KV statistics need a KV cache in the compute dtype (calibration runs without fp8)");
  const size_t n = size_t(spec_.layers) * 2 * spec_.kv_heads;
  if (stats_absmax_ == nullptr) {
    stats_absmax_ = static_cast<float*>(dev_alloc(n * 4));
    stats_scales_ = static_cast<float*>(dev_alloc(n * 4));
    stats_counts_ = static_cast<unsigned long long*>(dev_alloc(2 * 8));
  }
  LOOM_CUDA_CHECK(cudaMemset(stats_absmax_, 0, n * 4));
  LOOM_CUDA_CHECK(cudaMemset(stats_counts_, 0, 2 * 8));
  stats_on_ = true;
  stats_count_sat_ = saturation_scales != nullptr;
  if (stats_count_sat_) {
    const KvScales& ks = *saturation_scales;
    ks.check_shape(spec_.layers, spec_.kv_heads);
    const std::vector<float> dev = ks.layer_rows();
    LOOM_CUDA_CHECK(cudaMemcpy(stats_scales_, dev.data(), n * 4, cudaMemcpyHostToDevice));
  }
}

KvStats CudaBackend::kv_stats() {
  LOOM_CHECK(stats_on_, "CUDA backend: kv_stats without collect_kv_stats");
  const size_t n = size_t(spec_.layers) * 2 * spec_.kv_heads;
  std::vector<float> m(n);
  unsigned long long c[2] = {0, 0};
  LOOM_CUDA_CHECK(cudaStreamSynchronize(stream_));
  LOOM_CUDA_CHECK(cudaMemcpy(m.data(), stats_absmax_, n * 4, cudaMemcpyDeviceToHost));
  LOOM_CUDA_CHECK(cudaMemcpy(c, stats_counts_, sizeof c, cudaMemcpyDeviceToHost));
  return KvStats::from_layer_rows(m, spec_.layers, spec_.kv_heads, c[0], c[1]);
}

void CudaBackend::fill_cache_random(uint64_t seed) {
  LOOM_CHECK(kv_ != nullptr, "CUDA backend: fill_cache_random before allocate_cache");
  // Uniform(-1, 1) in the cache's dtype (e4m3 by the KV quantizer): a constant cache would time
  // the same but draw less power than real data (H200, b256 ctx 8,148 FP8: the step replayed at
  // 593 W on 0x30 everywhere, where a 256-job run holds the 700 W cap).
  LOOM_KERNEL(fill_uniform(kv_t_, kv_, kv_bytes_ / dtype_size(kv_t_), seed, 1.0f, stream_));
  LOOM_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

bool CudaBackend::attention_mma() const {
  return attention_mma_supported(t_, spec_.heads, spec_.kv_heads, spec_.head_dim);
}

// A short chunk (a frame's last token and its action slots: Terra's 7) runs as one-slot tiles
// through the decode kernel beside the decoding sequences: the prefill kernel would walk its
// whole context in one block per kv head (~190 us a layer at 7,000 keys on an H200, after the
// decode kernel), where one-slot tiles read the chunk's keys a few more times in parallel.
// Tensor-core path only (the bits are the same either way there).
bool CudaBackend::one_slot_tiles(int n_new) const {
  constexpr int kMaxOneSlotChunk = 16;
  return n_new == 1 || (attention_mma() && n_new <= kMaxOneSlotChunk);
}

int CudaBackend::pick_splits(int n_tiles) const {
  const int blocks = std::max(1, n_tiles * spec_.kv_heads);
  int splits = std::max(1, (4 * num_sms_ + blocks - 1) / blocks);
  splits = std::min(splits, 128);  // kMaxSplits of kernels/attention.cu
  splits = std::min<int>(splits, int(kMaxPartBlocks / size_t(blocks)));
  return std::max(1, splits);
}

double CudaBackend::time_graph_replay(int n_seqs, int iters) {
  int bucket = 0;
  while (bucket + 1 < kBuckets && kBucketSizes[bucket] < n_seqs) bucket++;
  cudaGraphExec_t g = last_graph_[size_t(bucket)];
  LOOM_CHECK(g != nullptr, "time_graph_replay: no graph captured for ", n_seqs, " sequences");
  cudaEvent_t e0, e1;
  LOOM_CUDA_CHECK(cudaEventCreate(&e0));
  LOOM_CUDA_CHECK(cudaEventCreate(&e1));
  LOOM_CUDA_CHECK(cudaGraphLaunch(g, stream_));  // warm
  LOOM_CUDA_CHECK(cudaEventRecord(e0, stream_));
  for (int i = 0; i < iters; i++) LOOM_CUDA_CHECK(cudaGraphLaunch(g, stream_));
  LOOM_CUDA_CHECK(cudaEventRecord(e1, stream_));
  LOOM_CUDA_CHECK(cudaEventSynchronize(e1));
  float ms = 0;
  LOOM_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return double(ms) / iters;
}

DeviceInfo CudaBackend::device_info() {
  DeviceInfo d;
  d.name = device_name_;
  d.memory_bytes = device_memory_;
  d.weight_bytes = w_.bytes;
  d.kv_bytes = kv_bytes_;
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess)
    peak_bytes_ = std::max(peak_bytes_, total_b - free_b);
  d.peak_bytes = peak_bytes_;
  d.kv_dtype = dtype_name(kv_t_);
  int v = 0;  // 1000 * major + 10 * minor
  if (cudaDriverGetVersion(&v) == cudaSuccess) d.driver = cat(v / 1000, ".", v % 1000 / 10);
  if (cudaRuntimeGetVersion(&v) == cudaSuccess) d.cuda_runtime = cat(v / 1000, ".", v % 1000 / 10);
  return d;
}

// Median milliseconds of `body` on `stream` over `reps` timed runs after `warmup` untimed ones.
static double median_ms(cudaStream_t stream, int warmup, int reps,
                        const std::function<void()>& body) {
  cudaEvent_t e0, e1;
  LOOM_CUDA_CHECK(cudaEventCreate(&e0));
  LOOM_CUDA_CHECK(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int i = 0; i < warmup + reps; i++) {
    LOOM_CUDA_CHECK(cudaEventRecord(e0, stream));
    body();
    LOOM_CUDA_CHECK(cudaEventRecord(e1, stream));
    LOOM_CUDA_CHECK(cudaEventSynchronize(e1));
    float t = 0;
    LOOM_CUDA_CHECK(cudaEventElapsedTime(&t, e0, e1));
    if (i >= warmup) ms.push_back(t);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  std::sort(ms.begin(), ms.end());
  return double(ms[ms.size() / 2]);
}

double CudaBackend::measure_copy_bandwidth_gbps() {
  size_t free_b = 0, total_b = 0;
  LOOM_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  const size_t bytes = std::min<size_t>(size_t(1) << 30, free_b / 4) / 256 * 256;
  LOOM_CHECK(bytes >= (size_t(64) << 20), "copy bandwidth: only ", free_b, " bytes free");
  void *a = nullptr, *c = nullptr;
  LOOM_CUDA_CHECK(cudaMalloc(&a, bytes));
  LOOM_CUDA_CHECK(cudaMalloc(&c, bytes));
  LOOM_KERNEL(fill_uniform(DType::F32, a, bytes / 4, 7, 1.0f, stream_));
  const double ms = median_ms(stream_, 3, 20, [&] {
    LOOM_CUDA_CHECK(cudaMemcpyAsync(c, a, bytes, cudaMemcpyDeviceToDevice, stream_));
  });
  cudaFree(a);
  cudaFree(c);
  return 2.0 * double(bytes) / (ms * 1e-3) / 1e9;  // bytes read + written
}

// The bf16 matrix-unit ceiling: an 8192³ GEMM through the same cuBLAS path as the model, on
// random data (zeros run faster), median of 10 after 3 warm-ups.
double CudaBackend::measure_gemm_tflops() {
  const int n = 8192;
  const size_t bytes = size_t(n) * n * 2;
  void *a = nullptr, *b = nullptr, *c = nullptr;
  LOOM_CUDA_CHECK(cudaMalloc(&a, bytes));
  LOOM_CUDA_CHECK(cudaMalloc(&b, bytes));
  LOOM_CUDA_CHECK(cudaMalloc(&c, bytes));
  LOOM_KERNEL(fill_uniform(DType::BF16, a, size_t(n) * n, 11, 1.0f, stream_));
  LOOM_KERNEL(fill_uniform(DType::BF16, b, size_t(n) * n, 12, 1.0f, stream_));
  const double ms =
      median_ms(stream_, 3, 10, [&] { gemm_.run(DType::BF16, a, b, DType::BF16, c, n, n, n); });
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  return 2.0 * double(n) * n * n / (ms * 1e-3) / 1e12;
}

void CudaBackend::set_step_timing(bool on) {
  timing_on_ = on;
  timing_ = StepTiming{};
}

void CudaBackend::set_profiling(bool on) {
  profiling_ = on;
  if (on) prof_totals_.clear(), prof_steps_.clear(), prof_decode_steps_ = 0;
}

cudaEvent_t CudaBackend::pooled_event() {
  cudaEvent_t e = nullptr;
  if (event_pool_.empty()) {
    LOOM_CUDA_CHECK(cudaEventCreate(&e));
  } else {
    e = event_pool_.back();
    event_pool_.pop_back();
  }
  return e;
}

void CudaBackend::prof_begin(const char* family) {
  if (!profiling_) return;
  const std::array<cudaEvent_t, 2> ev{pooled_event(), pooled_event()};
  LOOM_CUDA_CHECK(cudaEventRecord(ev[0], stream_));
  prof_open_.push_back({family, ev});
}

void CudaBackend::prof_end() {
  if (!profiling_) return;
  LOOM_CUDA_CHECK(cudaEventRecord(prof_open_.back().second[1], stream_));
}

void CudaBackend::prof_collect(const char* phase) {
  prof_steps_[phase]++;
  for (auto& p : prof_open_) {
    float ms = 0;
    LOOM_CUDA_CHECK(cudaEventElapsedTime(&ms, p.second[0], p.second[1]));
    KernelTime& k = prof_totals_[cat(phase, "/", p.first)];
    k.name = p.first;
    k.phase = phase;
    k.ms += ms;
    k.calls++;
    event_pool_.push_back(p.second[0]);
    event_pool_.push_back(p.second[1]);
  }
  prof_open_.clear();
}

std::vector<KernelTime> CudaBackend::kernel_times() const {
  std::vector<KernelTime> v;
  for (const auto& [key, k] : prof_totals_) {
    v.push_back(k);
    v.back().steps = prof_steps_.at(k.phase);
  }
  std::sort(v.begin(), v.end(), [](const KernelTime& a, const KernelTime& c) {
    return a.phase != c.phase ? a.phase < c.phase : a.ms > c.ms;
  });
  return v;
}

}  // namespace loom::gpu
