// The forward pass of one step: the kernel sequence, nothing on the host between layers, so
// that a decode step can be captured into a CUDA graph as is.
//
// Residual stream x is fp32. Two schedules of the same math:
//   GEMV (bf16, ≤ kGemvMaxSlots = 2 slots: decode at batch 1-2, bound by streaming the
//     weights) — four fused GEMVs per layer: qkv ← rms_norm(x); x += o·attn; gate_up ←
//     rms_norm(x); x += down·silu_mul(gate_up); plus RoPE/KV write and attention.
//   GEMM (everything else) — rms_norm_residual, cuBLAS GEMM, act_mul kernels; a block's output
//     (delta) is added to x by the next norm. At 3-16 slots some of its GEMMs run through the
//     tensor-core GEMV instead (gemv_linear_ops).
// Features beyond Llama's layer (model/spec.h), each a launch of its own where it acts and
// nothing on Llama's path: LayerNorm (layer_norm_residual in place of rms_norm_residual),
// biases (bias_activation after the GEMM they follow), the plain MLP (bias_activation with the
// activation on the up GEMM's output), gated MLPs with another activation (act_mul), learned
// absolute positions (add_absolute_positions after embed_assemble); rotary off is RoPE with
// inv_freq 0 (after_load), which leaves q and k bit for bit; a logit range samples from the
// range's columns of the logits. The GEMV schedule fuses Llama's layer only (llama_layer).
// Batch-invariant mode (--batch-invariant, bf16): the GEMM schedule at every batch size, every
// linear layer through linear_fixed (kernels/linear_fixed.cuh, an order of arithmetic fixed by
// k alone) instead of cuBLAS, and lm_head straight to fp32 logits. The other kernels are
// row-wise already: embed_assemble, rms_norm_residual, action_input_layer and sample_tokens
// give each row its own block(s) whose work depends on the row alone, act_mul, bias_activation
// and convert are elementwise.
#include <string_view>

#include "backend/cuda/cuda_backend_impl.h"
#include "kernels/activation.cuh"
#include "kernels/attention.cuh"
#include "kernels/embed.cuh"
#include "kernels/gemv.cuh"
#include "kernels/kv_fp8.cuh"
#include "kernels/layer_norm.cuh"
#include "kernels/linear_fixed.cuh"
#include "kernels/mlp_activation.cuh"
#include "kernels/norm.cuh"
#include "kernels/positions.cuh"
#include "kernels/rope.cuh"

namespace loom::gpu {

// Up to this many slots the fused GEMV schedule runs (the FMA kernel at one row, the
// tensor-core kernel at 2: kernels/gemv.cuh); above it the GEMM path. The choice is made on the
// slots padded to the sequence bucket (StepLayout::gemv_slots), so that a step run eagerly takes
// its graph's kernels. At 3-4 slots the GEMM path (qkv, o and down through the tensor-core GEMV,
// gate_up on cuBLAS, the norms by PDL) beat the fused chain, s/frame 0.923 → 0.857 at batch 3
// and 0.922 → 0.861 at 4; at 2 the fused chain stays ahead, 0.846 against 0.862 (H200,
// bench/NOTES-cuda.md, session 32).
constexpr int kGemvMaxSlots = 2;
// Above kGemvMaxSlots, the GEMM path's layer GEMMs named here (GemvLinearOp bits) run the
// tensor-core GEMV on the same bf16 inputs (the norms and silu·mul stay their own kernels) instead
// of cuBLAS, by the bucket-padded slot count as above. Measured side by side (H200,
// bench/NOTES-cuda.md, session 29), s/frame: at 8 slots qkv + o + down 1.200 → 1.142 (qkv +
// o 1.158, all four 1.147), at 16 qkv + o 1.437 → 1.407 (with down 1.423, all four 1.459);
// gate_up's cuBLAS GEMM stays faster at both.
enum GemvLinearOp : unsigned { kOpQkv = 1, kOpO = 2, kOpGateUp = 4, kOpDown = 8 };
static unsigned gemv_linear_ops(int gemv_slots) {
  if (gemv_slots <= kGemvMaxSlots) return 0;  // the fused GEMV schedule's slot counts
  if (gemv_slots <= 8) return kOpQkv | kOpO | kOpDown;
  return gemv_slots <= 16 ? kOpQkv | kOpO : 0;
}

void CudaBackend::linear(const void* x, const void* w, DType y_t, void* y, int m, int n, int k,
                         int ldy) {
  if (!invariant_) {
    gemm_.run(t_, x, w, y_t, y, m, n, k, 0.0f, ldy);
    return;
  }
  LinearFixedArgs a;
  a.x = x;
  a.w = w;
  a.y = y;
  a.y_t = y_t;
  a.m = m;
  a.n = n;
  a.k = k;
  a.ldy = ldy;
  a.pdl = true;  // every linear layer of the pass follows a kernel of the pass
  LOOM_KERNEL(linear_fixed(a, stream_));
}

// The layer the fused GEMVs implement: RMSNorm with a scale in the prologue, silu·mul in the
// down GEMV's, no biases.
static bool llama_layer(const ModelSpec& s) {
  return s.norm == NormKind::Rms && s.norm_affine && s.mlp == MlpKind::SwiGlu &&
         s.act == Activation::Silu && !s.qkv_bias && !s.o_bias && !s.mlp_bias;
}

// The models and modes the GEMV kernels serve: bf16 weights, not --batch-invariant, a Llama
// layer whose dimensions are multiples of 8.
static bool gemv_model(const ModelSpec& s, DType t, bool invariant) {
  return !invariant && t == DType::BF16 && s.hidden % 8 == 0 && s.intermediate % 8 == 0 &&
         s.q_dim() % 8 == 0 && llama_layer(s);
}

bool CudaBackend::gemv_schedule(const StepLayout& L) const {
  return gemv_model(spec_, t_, invariant_) && L.gemv_slots <= kGemvMaxSlots;
}

// The lm_head as the fused GEMV (fp32 logits) for one output row of one sequence, else cuBLAS
// (bf16 logits): on the sequences, not the output rows, because a graph step's rows are its
// bucket's (an eager step of 2 sequences with one draw takes what its graph takes).
bool CudaBackend::lm_head_gemv(const StepLayout& L) const {
  return gemv_schedule(L) && L.n_out == 1 && L.n_seqs == 1;
}

void CudaBackend::forward(const StepLayout& L, int num_splits, bool mega) {
  if (mega) {  // the whole decode step in one launch (cuda_mega.cpp)
    run_mega(L);
    return;
  }
  const ModelSpec& s = spec_;
  const int H = s.hidden, I = s.intermediate;
  const int qkv_dim = s.q_dim() + 2 * s.kv_dim();
  auto in_i32 = [&](size_t off) { return reinterpret_cast<const int32_t*>(in_dev_ + off); };
  const int32_t* tokens = in_i32(L.tokens);
  const int32_t* positions = in_i32(L.positions);
  const int32_t* out_rows = in_i32(L.out_rows);
  const auto* params = reinterpret_cast<const SampleParamsDev*>(in_dev_ + L.params);
  const bool gemv = gemv_schedule(L);

  // 1. Inputs: action projection of action slots, then token gather + position tables.
  void* act_out = nullptr;
  if (L.n_act > 0) {
    prof_begin("action_projection");
    const int n_layers = int(w_.action.size());
    ActionInputArgs in;
    in.actions = reinterpret_cast<const float*>(in_dev_ + L.actions);
    in.action_dim = s.action_dim;
    in.act_slots = in_i32(L.act_slots);
    in.n_act = L.n_act;
    in.w = w_.action[0].weight.f32();
    in.b = w_.action[0].bias.f32();
    in.hidden = H;
    in.relu = n_layers > 1;
    in.out_t = t_;
    in.out = act_a_;
    LOOM_KERNEL(action_input_layer(in, stream_));
    void* cur = act_a_;
    void* nxt = act_b_;
    for (int l = 1; l < n_layers; l++) {
      linear(cur, w_.action[size_t(l)].weight.data, t_, nxt, L.n_act, H, H);
      LOOM_KERNEL(bias_activation({t_, nxt, w_.action[size_t(l)].bias.f32(), L.n_act, H,
                                   l + 1 < n_layers, Activation::Relu},
                                  stream_));
      std::swap(cur, nxt);
    }
    act_out = cur;
    prof_end();
  }
  prof_begin("embed");
  EmbedArgs e;
  e.t = t_;
  e.tokens = tokens;
  e.positions = positions;
  e.act_row = in_i32(L.act_row);
  e.embed = w_.embed.data;
  e.act_out = act_out;
  e.pos_spatial = w_.pos_spatial.f32();
  e.pos_temporal = w_.pos_temporal.f32();
  e.frame_slots = s.frame_slots();
  e.spatial_rows = s.spatial_rows;
  e.temporal_rows = s.temporal_rows;
  e.vocab = s.vocab;
  e.n_slots = L.n_slots;
  e.hidden = H;
  e.x = x_;
  LOOM_KERNEL(embed_assemble(e, stream_));
  if (s.positions == PositionKind::Absolute)
    LOOM_KERNEL(add_absolute_positions({x_, positions, w_.pos_absolute.f32(), s.position_offset,
                                        s.max_positions + s.position_offset, L.n_slots, H},
                                       stream_));
  prof_end();

  // Benchmark decomposition (cuda_set_debug_skip's bits): whether a family's kernels are left
  // out of this pass.
  auto skipped = [&](std::string_view f) {
    if (debug_skip_ == 0) return false;
    const bool mm = f.substr(0, 5) == "gemm_" || f.substr(0, 5) == "gemv_";
    const std::string_view op = mm ? f.substr(5) : std::string_view();
    const bool head = op == "lm_head";
    const int bit = f == "paged_attention"                                         ? 1
                    : head                                                         ? 4
                    : f == "sample"                                                ? 4 | 16
                    : f == "rms_norm" || f == "silu_mul" || f == "bias_activation" ? 8
                    : op == "qkv"                                                  ? 2 | 32
                    : op == "o"                                                    ? 2 | 64
                    : op == "gate_up" || op == "up"                                ? 2 | 128
                    : op == "down"                                                 ? 2 | 256
                                                                                   : 0;
    return (debug_skip_ & bit) != 0;
  };
  const size_t kv_layer = size_t(num_blocks_ + 1) * block_size_ * s.kv_dim() * dtype_size(kv_t_);
  auto gemv_run = [&](const char* family, const void* w, int n, int k, GemvIn in, const void* x,
                      const float* norm_w, const int32_t* rows, int m, GemvOut out, void* y,
                      int y_stride = 0, bool beside = false) {
    if (skipped(family)) return;
    prof_begin(family);
    GemvArgs g;
    g.w = w;
    g.n = n;
    g.k = k;
    g.m = m;
    g.in = in;
    g.x = x;
    g.x_stride = in == GemvIn::RmsNorm ? H : k;
    g.rows = rows;
    g.norm_w = norm_w;
    g.eps = s.rms_eps;
    g.out = out;
    g.y = y;
    g.y_stride = y_stride;
    g.pdl = true;  // every GEMV follows a kernel of this pass (embed, attention or a GEMV)
    g.beside_attention = beside;  // (one row only)
    LOOM_KERNEL(gemv_bf16(g, num_sms_, stream_));
    prof_end();
  };
  // The GEMM path's layer GEMMs that run through the GEMV (gemv_linear_ops: op bits), and
  // where down is one of them (3-8 slots) the RMSNorm and act_mul kernels by programmatic
  // dependent launch, so that the qkv and down GEMVs after them stream their first weights
  // while they run. H200, loom bench 8 frames, two rounds: b8 0.995 -> 0.964 s/frame; with qkv
  // and o alone through the GEMV (9-16 slots) b16 1.168 -> 1.178, so not there
  // (bench/results/2026-12-02-h200-s31-norm-act-mul-pdl-b8-kept.json), nor the attention norm
  // alone there: b12 1.163 / b16 1.176 both ways (…-s32-attn-norm-pdl-9-16-slots-not-kept.json).
  const unsigned gemv_ops =
      !gemv && gemv_model(s, t_, invariant_) ? gemv_linear_ops(L.gemv_slots) : 0u;
  const bool norms_pdl = (gemv_ops & kOpDown) != 0;
  // x += delta, then the spec's norm of the selected rows; null weight: norm_affine false.
  auto norm_run = [&](const void* delta, const DeviceTensor& w, const DeviceTensor& b,
                      const int32_t* rows, int n_rows, void* out) {
    const bool rms = s.norm == NormKind::Rms;
    NormArgs a{t_,
               x_,
               delta,
               rms ? (w.data ? w.f32() : norm_ones_) : w.f32(),
               rms ? nullptr : b.f32(),
               rows,
               n_rows,
               H,
               s.rms_eps,
               out,
               norms_pdl};
    if (skipped("rms_norm")) return;
    prof_begin(rms ? "rms_norm" : "layer_norm");
    LOOM_KERNEL(rms ? rms_norm_residual(a, stream_) : layer_norm_residual(a, stream_));
    prof_end();
  };
  // y[rows, n] = act(y + bias) when act, else y + bias; nothing when neither applies.
  auto bias_run = [&](void* y, const DeviceTensor& bias, int rows, int n, bool act) {
    if ((bias.data == nullptr && !act) || skipped("bias_activation")) return;
    prof_begin("bias_activation");
    LOOM_KERNEL(bias_activation({t_, y, bias.f32(), rows, n, act, s.act}, stream_));
    prof_end();
  };
  auto gemm_run = [&](const char* family, const void* x, const void* w, DType y_t, void* y, int m,
                      int n, int k, int ldy = 0) {
    if (skipped(family)) return;
    prof_begin(family);
    linear(x, w, y_t, y, m, n, k, ldy);
    prof_end();
  };
  // A layer GEMM of the GEMM path, bf16 [n_slots, k] → [n_slots, n]: cuBLAS, or the GEMV where
  // gemv_ops names it (op: its bit; gemv_family its profile name).
  auto layer_mm = [&](const char* family, const char* gemv_family, unsigned op, const void* x,
                      const void* w, void* y, int n, int k) {
    if (gemv_ops & op)
      gemv_run(gemv_family, w, n, k, GemvIn::Plain, x, nullptr, nullptr, L.n_slots, GemvOut::Store,
               y);
    else
      gemm_run(family, x, w, t_, y, L.n_slots, n, k);
  };

  // 2. Layers. Decode (one slot a tile): the decode attention kernel (tensor-core for bf16,
  // CUDA-core for fp32), RoPE and the new K/V write fused into it.
  const bool decode_attn =
      L.one_slot_a_sequence() && (attention_mma() || s.heads / s.kv_heads <= kDecodeMaxG);
  // The one-row qkv GEMV leaves room for the decode attention kernel's blocks
  // (GemvArgs::beside_attention). Not o after attention: measured slower (gemv.cu).
  const bool beside = decode_attn;
  for (int l = 0; l < s.layers; l++) {
    const LayerSet<DeviceTensor>& W = w_.layers[size_t(l)];
    if (gemv) {
      gemv_run("gemv_qkv", W.qkv.data, qkv_dim, H, GemvIn::RmsNorm, x_, W.attn_norm.f32(), nullptr,
               L.n_slots, GemvOut::Store, qkv_, 0, beside);
    } else {
      norm_run(l > 0 ? delta_ : nullptr, W.attn_norm, W.attn_norm_bias, nullptr, L.n_slots, h_);
      layer_mm("gemm_qkv", "gemv_qkv", kOpQkv, h_, W.qkv.data, qkv_, qkv_dim, H);
      bias_run(qkv_, W.qkv_bias, L.n_slots, qkv_dim, false);
    }

    if (!skipped("paged_attention")) {
      const int kv_l = (debug_skip_ & 512) ? 0 : l;  // 512: every layer over layer 0's cache
      char* k_cache = static_cast<char*>(kv_) + size_t(2 * kv_l) * kv_layer;
      char* v_cache = k_cache + kv_layer;
      const bool kv_fp8 = kv_t_ == DType::F8E4M3;
      const float* kv_scale = kv_fp8 ? kv_scale_ + size_t(l) * 2 * s.kv_heads : nullptr;
      if (!decode_attn) {  // the decode attention kernel does RoPE and the KV write itself
        prof_begin("rope_kv_write");
        RopeKvArgs r;
        r.t = t_;
        r.qkv = qkv_;
        r.positions = positions;
        r.cache_slot = in_i32(L.cache_slot);
        r.inv_freq = inv_freq_;
        r.n_slots = L.n_slots;
        r.heads = s.heads;
        r.kv_heads = s.kv_heads;
        r.head_dim = s.head_dim;
        r.k_cache = k_cache;
        r.v_cache = v_cache;
        r.kv_fp8 = kv_fp8;
        r.kv_scale = kv_scale;
        r.pdl = !(debug_skip_ & 1024);  // waits first: safe after the GEMV or cuBLAS's GEMM
        LOOM_KERNEL(rope_kv_write(r, stream_));
        prof_end();
      }

      prof_begin("paged_attention");
      AttentionArgs a;
      a.t = t_;
      a.qkv = qkv_;
      a.k_cache = k_cache;
      a.v_cache = v_cache;
      a.kv_fp8 = kv_fp8;
      a.kv_scale = kv_scale;
      a.block_tables = in_i32(L.block_tables);
      a.bt_stride = L.bt_stride;
      a.kv_len = in_i32(L.kv_len);
      a.slot_start = in_i32(L.slot_start);
      a.tiles = in_i32(L.tiles);
      a.n_tiles = L.n_tiles;
      a.heads = s.heads;
      a.kv_heads = s.kv_heads;
      a.head_dim = s.head_dim;
      a.block_size = block_size_;
      a.num_splits = num_splits;
      a.partial_o = part_o_;
      a.partial_ml = part_ml_;
      a.out = attn_;
      a.decode = decode_attn;
      a.fuse_rope = decode_attn;
      a.mma_partial = part_mma_;
      a.mma_partial_floats = part_mma_floats_;
      a.mma_counters = mma_counters_;
      a.mma_counters_len = mma_counters_len_;
      a.cache_slots = (num_blocks_ + 1) * block_size_;
      a.positions = positions;
      a.cache_slot = in_i32(L.cache_slot);
      a.inv_freq = inv_freq_;
      a.pdl = !(debug_skip_ & 1024);  // follows rope_kv_write or (decode) the qkv GEMV
      if (debug_skip_ & 2048) a.tma_blocks_per_sm = 0;
      if (debug_skip_ & (4096 | 8192)) a.split_blocks_per_sm = (debug_skip_ & 4096) ? 1 : 0;
      if (debug_skip_ & 32768) a.tma_chunk_tail = false;
      a.tma_shared_kv = L.shared_kv;
      a.tma_group = L.group_kv;
      if (!decode_attn && attention_mma() && L.n_one_tiles > 0) {
        // A mixed step: the one-slot tiles (decoding sequences, short chunks) through the
        // decode kernel, the longer chunks through the prefill kernel (the same bits for every
        // row: attention_mma.cu). With the whole batch on the prefill kernel a step with one
        // frame's action chunk in it took ~2x a decode step at 256 sequences.
        AttentionArgs d = a;
        d.n_tiles = L.n_one_tiles;
        d.decode = true;
        LOOM_KERNEL(paged_attention(d, stream_));
        a.tiles += 3 * L.n_one_tiles;
        a.n_tiles -= L.n_one_tiles;
      }
      if (a.n_tiles > 0) LOOM_KERNEL(paged_attention(a, stream_));
      prof_end();
      if (stats_on_) {  // loom calibrate: the rows this step wrote
        KvStatsArgs k;
        k.t = t_;
        k.k_cache = k_cache;
        k.v_cache = v_cache;
        k.cache_slot = in_i32(L.cache_slot);
        k.n_slots = L.n_slots;
        k.kv_heads = s.kv_heads;
        k.head_dim = s.head_dim;
        k.absmax = stats_absmax_ + size_t(l) * 2 * s.kv_heads;
        k.scales = stats_count_sat_ ? stats_scales_ + size_t(l) * 2 * s.kv_heads : nullptr;
        k.counts = stats_counts_;
        LOOM_KERNEL(gpu::kv_stats(k, stream_));
      }
    }

    if (gemv) {
      gemv_run("gemv_o", W.o.data, H, s.q_dim(), GemvIn::Plain, attn_, nullptr, nullptr, L.n_slots,
               GemvOut::AddF32, x_);
      gemv_run("gemv_gate_up", W.gate_up.data, 2 * I, H, GemvIn::RmsNorm, x_, W.mlp_norm.f32(),
               nullptr, L.n_slots, GemvOut::Store, gu_);
      gemv_run("gemv_down", W.down.data, H, I, GemvIn::SiluMul, gu_, nullptr, nullptr, L.n_slots,
               GemvOut::AddF32, x_);
    } else {
      layer_mm("gemm_o", "gemv_o", kOpO, attn_, W.o.data, delta_, H, s.q_dim());
      bias_run(delta_, W.o_bias, L.n_slots, H, false);
      norm_run(delta_, W.mlp_norm, W.mlp_norm_bias, nullptr, L.n_slots, h_);
      if (s.mlp == MlpKind::SwiGlu) {
        layer_mm("gemm_gate_up", "gemv_gate_up", kOpGateUp, h_, W.gate_up.data, gu_, 2 * I, H);
        bias_run(gu_, W.gate_up_bias, L.n_slots, 2 * I, false);
        if (!skipped("silu_mul")) {
          prof_begin("silu_mul");
          LOOM_KERNEL(act_mul({t_, gu_, act_, L.n_slots, I, s.act, norms_pdl}, stream_));
          prof_end();
        }
      } else {
        gemm_run("gemm_up", h_, W.up.data, t_, act_, L.n_slots, I, H);
        bias_run(act_, W.up_bias, L.n_slots, I, true);
      }
      layer_mm("gemm_down", "gemv_down", kOpDown, act_, W.down.data, delta_, H, I);
      bias_run(delta_, W.down_bias, L.n_slots, H, false);
    }
  }

  // 3. Final norm and lm_head on the last slot of each sequence that needs logits, then draws.
  if (L.n_out == 0) return;
  // One row: the fused GEMV (final norm in its prologue) streams lm_head at ~4.1 TB/s. More
  // rows: cuBLAS on the padded (aligned) lm_head, ~4.1 TB/s at 4 and 8 rows where the GEMV,
  // which re-reads its input rows per weight vector, falls to 2.9 and 1.7 (H200, 2026-11-22).
  const bool bf16_logits = logits_bf16(L);
  if (lm_head_gemv(L)) {
    gemv_run("gemv_lm_head", w_.lm_head.data, s.vocab, H, GemvIn::RmsNorm, x_, w_.final_norm.f32(),
             out_rows, L.n_out, GemvOut::StoreF32, logits_, logits_ld_);
  } else {
    norm_run(gemv ? nullptr : delta_, w_.final_norm, w_.final_norm_bias, out_rows, L.n_out,
             h_last_);
    if (bf16_logits) {
      // bf16 logits (as HF computes them in bf16), drawn from as they are (widened exactly on
      // load; submit() widens them to logits_ only when a step asks for logits): cuBLAS picks a
      // ~5x slower kernel for an fp32 output of bf16 operands at this shape (measured 2.7 ms at
      // 256 rows on an H200), and the fp32 copy cost ~0.1 ms a step at 256 rows.
      gemm_run("gemm_lm_head", h_last_, w_.lm_head.data, DType::BF16, logits_t_, L.n_out,
               logits_ld_, H,
               logits_ld_);  // all padded rows: aligned shapes
    } else {
      // fp32 logits of the vocab rows only (the sampler reads no further); with
      // --batch-invariant no bf16 rounding step.
      gemm_run("gemm_lm_head", h_last_, w_.lm_head.data, DType::F32, logits_, L.n_out,
               invariant_ ? s.vocab : logits_ld_, H, logits_ld_);
    }
  }
  if (skipped("sample")) return;
  prof_begin("sample");
  // After the lm_head GEMV the draw kernels launch early (PDL) and wait for the logits.
  // A logit range draws from its columns only, ids relative to sample_begin() as
  // cpu_backend's sample_token(logits + lo, hi - lo) does (step() adds lo back on the host).
  const int lo = s.sample_begin(), hi = s.sample_end();
  const DType lt = bf16_logits ? DType::BF16 : DType::F32;
  const char* lg =
      static_cast<const char*>(bf16_logits ? logits_t_ : logits_) + size_t(lo) * dtype_size(lt);
  LOOM_KERNEL(sample_tokens(lt, lg, L.n_out, hi - lo, logits_ld_, params, sample_ws_, tokens_,
                            stream_, lm_head_gemv(L)));
  prof_end();
}

bool CudaBackend::logits_bf16(const StepLayout& L) const {
  return t_ == DType::BF16 && !invariant_ && !lm_head_gemv(L);
}

}  // namespace loom::gpu
