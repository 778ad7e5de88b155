// CudaBackend's side of the decode-step megakernel (kernels/mega, issue 15): which decode steps
// take it, the per-bucket schedules and sync blocks on the device, the launch (captured into
// the bucket's graph like the graph path's kernels) and the check of a launch that gave up.
//
// A decode step of B ≤ 8 sequences (bucket 1, 2, 4 or 8) takes the megakernel when the model
// passes build_mega_schedule's checks (mega_refusal_ empty), the weights, activations and KV
// cache share the compute dtype (bf16; f32 with MegakernelMode::Force), the step is not batch
// invariant, and no sampled row filters (top-k / top-p run on the graph path's draw kernels).
#include <algorithm>
#include <numeric>
#include <random>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/mega_schedule.h"
#include "kernels/attention.h"

namespace loom::gpu {
namespace {

int mega_index(int B) {
  return B <= 1 ? 0 : B <= 2 ? 1 : B <= 4 ? 2 : 3;
}

// 16-row units for the layer GEMVs (a row a warp), 64 for lm_head: at batch 1 on an H200 a
// step took 1,895 us with 16-row units, 1,937 with 32 and 2,289 with 64 (bench/NOTES-cuda.md).
mega::MegaOptions mega_options(DType t) {
  mega::MegaOptions o;
  o.weight_t = t;
  return o;
}

}  // namespace

bool CudaBackend::mega_wanted(const StepBatch& b, int B) const {
  if (mega_mode_ == MegakernelMode::Off || B > mega::kMegaMaxBatch) return false;
  if (mega_mode_ == MegakernelMode::Auto && t_ != DType::BF16) return false;
  if (invariant_ || kv_t_ != t_ || debug_skip_ != 0 || stats_on_ || !mega_refusal_.empty())
    return false;
  const int range = spec_.sample_end() - spec_.sample_begin();
  for (size_t s = 0; s < b.sampling.size(); s++) {
    const SamplingParams& p = b.sampling[s];
    if (b.sample[s] && p.temperature > 0.0f && (p.top_k_on(range) || p.top_p_on())) return false;
  }
  return true;
}

std::vector<mega::MegaLayer> CudaBackend::mega_layer_table() const {
  std::vector<mega::MegaLayer> layers(size_t(spec_.layers));
  for (int l = 0; l < spec_.layers; l++) {
    const LayerSet<DeviceTensor>& W = w_.layers[size_t(l)];
    mega::MegaLayer& m = layers[size_t(l)];
    m.qkv = W.qkv.data;
    m.o = W.o.data;
    m.gate_up = W.gate_up.data;
    m.down = W.down.data;
    m.attn_norm = W.attn_norm.f32();
    m.mlp_norm = W.mlp_norm.f32();
  }
  return layers;
}

void CudaBackend::ensure_mega(int B) {
  mega::MegaOptions opts = mega_options(t_);
  if (mega_debug_.rows_per_tile > 0) opts.rows_per_tile = mega_debug_.rows_per_tile;
  if (mega_debug_.attn_splits > 0) opts.attn_splits = mega_debug_.attn_splits;
  // The layer table points into the KV pool: rebuilt for each pool (allocate_cache resets it).
  if (mega_layers_kv_ != kv_) {
    const size_t kv_layer =
        size_t(num_blocks_ + 1) * block_size_ * spec_.kv_dim() * dtype_size(kv_t_);
    std::vector<mega::MegaLayer> layers = mega_layer_table();
    for (int l = 0; l < spec_.layers; l++) {
      mega::MegaLayer& m = layers[size_t(l)];
      m.k_cache = static_cast<char*>(kv_) + size_t(2 * l) * kv_layer;
      m.v_cache = static_cast<char*>(m.k_cache) + kv_layer;
    }
    if (mega_layers_ == nullptr)
      mega_layers_ = static_cast<mega::MegaLayer*>(dev_alloc(layers.size() * sizeof(layers[0])));
    LOOM_CUDA_CHECK(cudaMemcpy(mega_layers_, layers.data(), layers.size() * sizeof(layers[0]),
                               cudaMemcpyHostToDevice));
    mega_layers_kv_ = kv_;
  }
  // Attention partitions a (slot, KV head): at most the splits or the longest context (the
  // block-table width) in 256-key partitions (mega_partition_keys), and the attention groups'
  // slots (kAttnGroups a split: attention_groups.cuh).
  const int splits = opts.attn_splits > 0 ? opts.attn_splits : mega::kMegaMaxSplits;
  const int max_parts =
      std::max(mega::kAttnGroups * splits,
               mega::mega_ceil_div(max_bt_ * block_size_, mega::kMegaPartitionKeys));
  if (max_parts != mega_max_parts_) {
    dev_free(mega_attn_part_);
    const size_t floats =
        size_t(mega::kMegaMaxBatch) * spec_.kv_heads * max_parts *
        size_t(mega::mega_partial_floats(spec_.heads / spec_.kv_heads, spec_.head_dim));
    mega_attn_part_ = static_cast<float*>(dev_alloc(floats * 4));
    // Zeroed once: AttnReduce copies each partial's 16-byte padding, which no step writes.
    LOOM_CUDA_CHECK(cudaMemset(mega_attn_part_, 0, floats * 4));
    mega_max_parts_ = max_parts;
  }
  if (mega_draw_part_ == nullptr) {
    const size_t tiles = size_t((spec_.vocab + opts.lm_rows_per_tile - 1) / opts.lm_rows_per_tile);
    mega_draw_part_ = static_cast<mega::MegaDrawPartial*>(
        dev_alloc(tiles * mega::kMegaMaxBatch * sizeof(mega::MegaDrawPartial)));
    for (auto*& h : mega_header_host_)
      LOOM_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&h), sizeof(mega::MegaSyncHeader)));
  }

  MegaBucket& m = mega_[size_t(mega_index(B))];
  if (m.built) return;
  mega::MegaSchedule s = mega::build_mega_schedule(spec_, B, num_sms_, opts);
  if (mega_debug_.drop_unit) {  // a schedule defect on purpose (MegakernelDebug)
    for (auto& prog : s.programs)
      for (auto it = prog.begin(); it != prog.end(); ++it)
        if (it->op == uint8_t(mega::MegaOp::Qkv) && it->layer == 0) {
          if (it->end - it->begin > 1)
            it->end--;
          else
            prog.erase(it);
          goto dropped;
        }
  dropped:;
  }
  std::vector<mega::MegaInstruction> instrs;
  std::vector<int32_t> begin{0};
  for (const auto& prog : s.programs) {
    instrs.insert(instrs.end(), prog.begin(), prog.end());
    begin.push_back(int32_t(instrs.size()));
  }
  // The bucket's lists replace its previous ones (a debug rebuild); empty: none.
  auto upload = [&](auto*& dst, const auto& src) {
    dev_free(dst);
    if (src.empty()) return;
    const size_t bytes = src.size() * sizeof(src[0]);
    dst = static_cast<std::remove_reference_t<decltype(dst)>>(dev_alloc(bytes));
    LOOM_CUDA_CHECK(cudaMemcpy(dst, src.data(), bytes, cudaMemcpyHostToDevice));
  };
  upload(m.instrs, instrs);
  upload(m.prog_begin, begin);
  std::vector<int32_t> perm;
  if (mega_debug_.permute_seed != 0) {
    perm.resize(size_t(num_sms_));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), std::mt19937_64(mega_debug_.permute_seed));
  }
  upload(m.cta_program, perm);
  // A new list counts other units into the counters: the block starts again from zero (after
  // the bucket's launches in flight, which count with the old list).
  if (m.sync == nullptr) {
    m.sync_bytes = s.sync_bytes();
    m.sync = static_cast<mega::MegaSyncHeader*>(dev_alloc(m.sync_bytes));
  }
  LOOM_CUDA_CHECK(cudaStreamSynchronize(stream_));
  LOOM_CUDA_CHECK(cudaMemset(m.sync, 0, m.sync_bytes));
  m.dims = s.dims;
  m.num_ctas = s.num_sms;
  if (mega_tmaps_ == nullptr && mega::mega_gemv_mma(s.dims, t_)) {  // the weights never move
    auto maps = std::make_unique<mega::MegaTmaps>();
    LOOM_KERNEL(mega::mega_encode_tmaps(s.dims, mega_layer_table().data(), w_.lm_head.data, *maps));
    mega_tmaps_ = std::move(maps);
  }
  m.prog_begin_host = begin;
  int longest = 0;  // instructions of the longest program
  for (const auto& prog : s.programs) longest = std::max(longest, int(prog.size()));
  if (mega_debug_.trace && longest > mega_trace_stride_) {
    // Other buckets' graphs hold the old buffer: they are captured again.
    LOOM_CUDA_CHECK(cudaStreamSynchronize(stream_));
    free_graphs();
    dev_free(mega_trace_);
    mega_trace_stride_ = longest;
    mega_trace_ = static_cast<mega::MegaTraceEntry*>(
        dev_alloc(size_t(num_sms_) * mega_trace_stride_ * sizeof(mega::MegaTraceEntry)));
  }
  m.built = true;
}

void CudaBackend::run_mega(const StepLayout& L) {
  const MegaBucket& m = mega_[size_t(mega_index(L.n_seqs))];
  LOOM_CHECK(m.built && m.dims.batch == L.n_seqs, "megakernel: no schedule for ", L.n_seqs,
             " sequences");
  auto in = [&](size_t off) { return reinterpret_cast<const int32_t*>(in_dev_ + off); };
  mega::MegaArgs a;
  a.t = t_;
  a.d = m.dims;
  a.instrs = m.instrs;
  a.prog_begin = m.prog_begin;
  a.cta_program = m.cta_program;
  a.num_ctas = m.num_ctas;
  a.sync = m.sync;
  a.layers = mega_layers_;
  a.embed = w_.embed.data;
  a.pos_spatial = w_.pos_spatial.f32();
  a.pos_temporal = w_.pos_temporal.f32();
  a.frame_slots = spec_.has_frames() ? spec_.frame_slots() : 0;
  a.final_norm = w_.final_norm.f32();
  a.lm_head = w_.lm_head.data;
  a.inv_freq = inv_freq_;
  a.eps = spec_.rms_eps;
  a.attn_scale = 1.0f / std::sqrt(float(spec_.head_dim));
  a.tokens = in(L.tokens);
  a.positions = in(L.positions);
  a.cache_slot = in(L.cache_slot);
  a.kv_len = in(L.kv_len);
  a.block_tables = in(L.block_tables);
  a.bt_stride = L.bt_stride;
  a.block_size = block_size_;
  a.block_div.set(uint32_t(block_size_));
  a.params = reinterpret_cast<const SampleParamsDev*>(in_dev_ + L.params);
  // The GEMVs on the tensor cores where the shapes and shared memory allow (gemv_mma.cuh:
  // batch 4-8 in bf16). MegakernelDebug::gemv_mma 1 turns it off.
  a.gemv_mma = mega_debug_.gemv_mma != 1 && mega::mega_gemv_mma(m.dims, t_) &&
               mega::mega_gemv_stages(m.dims, t_, mega_smem_optin_, false, true) >= 2;
  a.tmaps = mega_tmaps_.get();
  // Attention's buffers beside the ring where they fit with a ring of 2+ slots (the kernel
  // takes that layout at 1-2 slots): the stream runs on through attention and a partition's K
  // and V are staged an instruction early. MegakernelDebug::attn_apart 1 turns it off.
  a.attn_apart = mega_debug_.attn_apart != 1 && m.dims.batch <= 2 &&
                 mega::mega_gemv_stages(m.dims, t_, mega_smem_optin_, true, a.gemv_mma) >= 2;
  a.attn_in_xs = !a.attn_apart && mega::mega_attn_in_xs(m.dims, t_);
  a.gemv_stages = mega::mega_gemv_stages(m.dims, t_, mega_smem_optin_, a.attn_apart, a.gemv_mma);
  // One weight segment a warp in flight while it waits at batch 1, two above: one binary, its
  // knob alternated, batch 1 1,523 -> 1,510 us at ctx 600 and 1,705 -> 1,696 at 7,000; batch 2
  // and 8 1-1.3% slower with one. But two for Down at batch 1 (its rows are three segments a
  // warp and it waits on GateUp): 1,510-1,535 -> 1,494-1,502 us, ctx 7,000 1,677-1,680 ->
  // 1,660-1,665 (H100, bench/NOTES-cuda.md session 62).
  a.gemv_early = m.dims.batch == 1 ? 1 : 2;  // (gemv_early_down: MegaArgs' 2)
  if (mega_debug_.gemv_early > 0) a.gemv_early = mega_debug_.gemv_early;
  if (mega_debug_.gemv_early_down > 0) a.gemv_early_down = mega_debug_.gemv_early_down;
  a.gemv_inflight = mega_debug_.gemv_inflight;
  a.reduce_chunk = mega_debug_.reduce_chunk;
  if (mega_debug_.attn_min_keys > 0) a.attn_min_keys = mega_debug_.attn_min_keys;
  a.skip_math = (mega_debug_.skip_math & 1) != 0;
  a.skip_waits = (mega_debug_.skip_math & 2) != 0;
  a.smem_skew = mega_debug_.smem_skew;
  // The ring runs on into the next GEMV instructions, except at batch 1: there stopping at the
  // instruction measured 6-65 us a step faster on three H100s, where at batch 8 running on is
  // 13-80 us faster (bench/NOTES-cuda.md, session 60).
  a.gemv_ahead = m.dims.batch > 1;
  if (mega_debug_.gemv_ahead > 0) a.gemv_ahead = mega_debug_.gemv_ahead == 2;
  if (mega_debug_.weights_evict > 0) a.weights_evict_first = mega_debug_.weights_evict == 2;
  a.sample_lo = spec_.sample_begin();
  a.sample_hi = spec_.sample_end();
  a.x = x_;
  a.qkv = qkv_;
  a.attn = attn_;
  a.gu = gu_;
  a.h_last = h_last_;
  a.logits = logits_;
  a.logits_ld = logits_ld_;
  a.attn_part = mega_attn_part_;
  a.max_parts = mega_max_parts_;
  a.draw_part = mega_draw_part_;
  a.tokens_out = tokens_;
  a.timeout_ns = mega_debug_.timeout_ns;
  a.jitter_seed = mega_debug_.jitter_seed;
  if (mega_debug_.trace) {
    a.trace = mega_trace_;
    a.trace_stride = mega_trace_stride_;
  }
  LOOM_KERNEL(mega::mega_step(a, stream_));
}

void CudaBackend::add_mega_trace(int B) {
  const MegaBucket& m = mega_[size_t(mega_index(B))];
  std::vector<mega::MegaTraceEntry> t(size_t(num_sms_) * mega_trace_stride_);
  LOOM_CUDA_CHECK(cudaMemcpyAsync(t.data(), mega_trace_, t.size() * sizeof(t[0]),
                                  cudaMemcpyDeviceToHost, stream_));
  LOOM_CUDA_CHECK(cudaStreamSynchronize(stream_));
  MegakernelTrace& sum = mega_trace_sum_;
  if (sum.phases.empty())
    for (int op = 0; op < mega::kMegaOps; op++)
      sum.phases.push_back({mega::mega_op_name(mega::MegaOp(op))});
  // Per (op, layer): the last end and the first staging over the CTAs.
  const int layers = m.dims.layers;
  std::vector<uint64_t> last_end(size_t(mega::kMegaOps) * layers, 0);
  std::vector<uint64_t> first_staged(last_end.size(), ~0ull);
  uint64_t first = ~0ull, last = 0;
  double cta_sum = 0, cta_max = 0;
  // A CTA's busy µs per (op, layer); those of the CTA with the longest program, and their max
  // over the CTAs.
  std::vector<double> op_layer(last_end.size()), slowest(last_end.size());
  std::vector<double> busiest(last_end.size(), 0.0);
  for (int p = 0; p < m.num_ctas; p++) {
    double cta = 0;
    std::fill(op_layer.begin(), op_layer.end(), 0.0);
    for (int i = 0; i < m.prog_begin_host[size_t(p) + 1] - m.prog_begin_host[size_t(p)]; i++) {
      const mega::MegaTraceEntry& e = t[size_t(p) * mega_trace_stride_ + i];
      const double busy = 1e-3 * double(e.end - e.start - e.waited);
      cta += busy;
      first = std::min(first, e.start);
      last = std::max(last, e.end);
      MegakernelPhase& ph = sum.phases[e.op % mega::kMegaOps];
      ph.wait_us += 1e-3 * double(e.waited) / m.num_ctas;
      ph.busy_us += busy / m.num_ctas;
      if (e.staged != 0) ph.stage_us += 1e-3 * double(e.staged - e.start - e.waited) / m.num_ctas;
      const size_t k = size_t(e.op % mega::kMegaOps) * layers + e.layer % layers;
      op_layer[k] += busy;
      last_end[k] = std::max(last_end[k], e.end);
      if (e.staged != 0) first_staged[k] = std::min(first_staged[k], e.staged);
    }
    cta_sum += cta;
    if (cta > cta_max) {
      cta_max = cta;
      std::copy(op_layer.begin(), op_layer.end(), slowest.begin());
    }
    for (size_t k = 0; k < busiest.size(); k++) busiest[k] = std::max(busiest[k], op_layer[k]);
  }
  for (int op = 0; op < mega::kMegaOps; op++) {
    MegakernelPhase& ph = sum.phases[size_t(op)];
    const int n_l = mega::mega_per_layer(mega::MegaOp(op)) ? layers : 1;
    for (int l = 0; l < layers; l++) {
      ph.slowest_us += slowest[size_t(op) * layers + l];
      if (l < n_l) ph.busiest_us += busiest[size_t(op) * layers + l] / n_l;
    }
  }
  sum.cta_mean_us += cta_sum / m.num_ctas;
  sum.cta_max_us += cta_max;
  // The chain: ops that run once count once, per-layer ops averaged over the layers.
  using mega::MegaOp;
  uint64_t prev = first;
  auto link = [&](MegaOp op, int l, double share) {
    const size_t k = size_t(op) * layers + l;
    MegakernelPhase& ph = sum.phases[size_t(op)];
    ph.span_us += 1e-3 * (double(last_end[k]) - double(prev)) * share;
    if (first_staged[k] != ~0ull)
      ph.lag_us += 1e-3 * (double(first_staged[k]) - double(prev)) * share;
    prev = last_end[k];
  };
  link(MegaOp::Embed, 0, 1.0);
  for (int l = 0; l < layers; l++)
    for (MegaOp op :
         {MegaOp::Qkv, MegaOp::AttnPartial, MegaOp::OProj, MegaOp::GateUp, MegaOp::Down})
      link(op, l, 1.0 / layers);
  for (MegaOp op : {MegaOp::FinalNorm, MegaOp::LmHead, MegaOp::Draw}) link(op, 0, 1.0);
  sum.steps++;
  sum.step_us += 1e-3 * double(last - first);
  sum.last_step.clear();
  for (int p = 0; p < m.num_ctas; p++)
    for (int i = 0; i < m.prog_begin_host[size_t(p) + 1] - m.prog_begin_host[size_t(p)]; i++) {
      const mega::MegaTraceEntry& e = t[size_t(p) * mega_trace_stride_ + i];
      auto rel = [&](uint64_t ns) { return 1e-3 * (double(ns) - double(first)); };
      sum.last_step.push_back({p, int(e.op), int(e.layer), rel(e.start), 1e-3 * double(e.waited),
                               e.staged != 0 ? rel(e.staged) : -1.0, rel(e.end)});
    }
}

MegakernelTrace CudaBackend::megakernel_trace() const {
  MegakernelTrace r = mega_trace_sum_;
  const double n = double(std::max<int64_t>(1, r.steps));
  r.step_us /= n, r.cta_mean_us /= n, r.cta_max_us /= n;
  for (MegakernelPhase& p : r.phases)
    p.busy_us /= n, p.wait_us /= n, p.stage_us /= n, p.span_us /= n, p.lag_us /= n,
        p.slowest_us /= n, p.busiest_us /= n;
  return r;
}

void CudaBackend::check_mega_trap(int buf, int B) {
  const mega::MegaSyncHeader& h = *mega_header_host_[size_t(buf)];
  if (h.trap_counter == 0) return;
  MegaBucket& m = mega_[size_t(mega_index(B))];
  const uint32_t c = h.trap_counter - 1, value = h.trap_value;
  // Every CTA left the step; later launches of this block saw the trap and left too. Zero the
  // block so that the next launch starts from step 0.
  LOOM_CUDA_CHECK(cudaStreamSynchronize(stream_));
  LOOM_CUDA_CHECK(cudaMemset(m.sync, 0, m.sync_bytes));
  fail("megakernel: a decode step of ", B, " sequences was abandoned: the wait on counter ", c,
       " (", mega::mega_counter_name(m.dims, c), ") still read ", value, " after ",
       double(mega_debug_.timeout_ns) * 1e-9,
       " s (a schedule defect or a stalled SM); the step's tokens are invalid and the counters "
       "were reset");
}

}  // namespace loom::gpu
