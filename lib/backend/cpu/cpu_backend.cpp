#include "backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/cpu/ops.h"
#include "backend/sampler.h"
#include "core/error.h"
#include "model/roles.h"

namespace loom {
namespace {

// A weight in fp32; empty when the spec's features do not use its role. data() of an empty
// vector is what the ops take as "no bias" / "no affine".
struct F32 {
  std::vector<float> v;
  const float* get() const { return v.empty() ? nullptr : v.data(); }
};

struct CpuLayer {
  F32 attn_norm, attn_norm_bias;  // [hidden]
  F32 qkv;                        // [q_dim + 2 kv_dim, hidden]
  F32 qkv_bias;                   // [q_dim + 2 kv_dim]
  F32 o;                          // [hidden, q_dim]
  F32 o_bias;                     // [hidden]
  F32 mlp_norm, mlp_norm_bias;    // [hidden]
  F32 gate_up, gate_up_bias;      // [2 inter, hidden], [2 inter]   SwiGLU
  F32 up, up_bias;                // [inter, hidden], [inter]       plain MLP
  F32 down, down_bias;            // [hidden, inter], [hidden]
  // Left uninitialised: attention reads only slots a step has written, and untouched pages of
  // a large pool cost no memory.
  std::unique_ptr<float[]> k_cache;  // [num_blocks, block_size, kv_heads, head_dim]
  std::unique_ptr<float[]> v_cache;  // [num_blocks, block_size, kv_heads, head_dim]
};

struct CpuActionLayer {
  std::vector<float> weight;  // [out, in]
  F32 bias;                   // [out]
  int in = 0, out = 0;
};

class CpuBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  // Every op loops over rows alone, in a fixed order, on one thread.
  bool batch_invariant() const override { return true; }

  void load(const ModelSpec& spec, const Weights& w) override {
    check_weights(spec, w, "cpu backend");
    auto f32 = [](const Tensor& t) { return F32{t.empty() ? std::vector<float>() : t.to_f32()}; };
    spec_ = spec;
    inv_freq_ = rope_inv_freq(spec.head_dim, spec.rope_theta, spec.rotary);
    ones_.assign(size_t(spec.hidden), 1.0f);
    embed_ = w.embed.to_f32();
    lm_head_ = w.lm_head.to_f32();
    final_norm_ = f32(w.final_norm);
    final_norm_bias_ = f32(w.final_norm_bias);
    pos_absolute_ = f32(w.pos_absolute);
    pos_spatial_ = f32(w.pos_spatial);
    pos_temporal_ = f32(w.pos_temporal);
    action_.clear();
    for (int j = 0; j < spec.action_layers(); j++) {
      const ActionLayer& a = w.action[size_t(j)];
      action_.push_back(
          {a.weight.to_f32(), f32(a.bias), int(a.weight.dim(1)), int(a.weight.dim(0))});
    }
    layers_.clear();
    for (const LayerWeights& l : w.layers) {
      CpuLayer c;
      c.attn_norm = f32(l.attn_norm);
      c.attn_norm_bias = f32(l.attn_norm_bias);
      c.qkv = f32(l.qkv);
      c.qkv_bias = f32(l.qkv_bias);
      c.o = f32(l.o);
      c.o_bias = f32(l.o_bias);
      c.mlp_norm = f32(l.mlp_norm);
      c.mlp_norm_bias = f32(l.mlp_norm_bias);
      c.gate_up = f32(l.gate_up);
      c.gate_up_bias = f32(l.gate_up_bias);
      c.up = f32(l.up);
      c.up_bias = f32(l.up_bias);
      c.down = f32(l.down);
      c.down_bias = f32(l.down_bias);
      layers_.push_back(std::move(c));
    }
  }

  size_t kv_block_bytes(int block_size) const override {
    return size_t(spec_.layers) * 2 * size_t(block_size) * size_t(spec_.kv_dim()) * sizeof(float);
  }

  int allocate_cache(const CacheRequest& req) override {
    block_size_ = req.block_size;
    num_blocks_ = req.num_blocks;
    if (num_blocks_ <= 0) {
      const double blocks =
          req.host_cache_gib * double(1ull << 30) / double(kv_block_bytes(block_size_));
      LOOM_CHECK(blocks < double(std::numeric_limits<int>::max()), "--kv-cache-gib ",
                 req.host_cache_gib, ": ", blocks, " blocks of ", kv_block_bytes(block_size_),
                 " bytes; a pool holds at most 2^31 - 1 blocks");
      num_blocks_ = int(blocks);
    }
    LOOM_CHECK(num_blocks_ > 0, "--kv-cache-gib ", req.host_cache_gib, ": holds no KV block of ",
               kv_block_bytes(block_size_), " bytes; expected at least ",
               double(kv_block_bytes(block_size_)) / double(1ull << 30), " GiB");
    LOOM_CHECK(req.kv_dtype != KvDType::BF16,
               "--kv-dtype bf16: the cpu backend computes in f32; its KV cache is f32 or fp8");
    kv_fp8_ = req.kv_dtype == KvDType::FP8;
    const KvScales s =
        req.kv_scales.empty() ? KvScales::ones(spec_.layers, spec_.kv_heads) : req.kv_scales;
    s.check_shape(spec_.layers, spec_.kv_heads);
    kv_scale_ = s.layer_rows();
    const size_t per_layer = size_t(num_blocks_) * size_t(block_size_) * size_t(spec_.kv_dim());
    for (CpuLayer& l : layers_) {
      l.k_cache.reset(new float[per_layer]);
      l.v_cache.reset(new float[per_layer]);
    }
    return num_blocks_;
  }

  DeviceInfo device_info() override {
    DeviceInfo d;
    d.name = "cpu";
    d.kv_dtype = kv_fp8_ ? "fp8" : "f32";
    d.kv_bytes = size_t(num_blocks_) * kv_block_bytes(block_size_);
    return d;
  }

  void step(const StepBatch& b, StepOutput& out) override;

  void collect_kv_stats(const KvScales* saturation_scales) override {
    LOOM_CHECK(!kv_fp8_,
               "KV statistics need a KV cache in the compute dtype (calibration "
               "runs without fp8)");
    stats_on_ = true;
    stats_absmax_.assign(size_t(spec_.layers) * 2 * spec_.kv_heads, 0.0f);
    stats_counts_[0] = stats_counts_[1] = 0;
    if (saturation_scales) saturation_scales->check_shape(spec_.layers, spec_.kv_heads);
    stats_scales_ = saturation_scales ? saturation_scales->layer_rows() : std::vector<float>();
  }
  KvStats kv_stats() override {
    return KvStats::from_layer_rows(stats_absmax_, spec_.layers, spec_.kv_heads, stats_counts_[0],
                                    stats_counts_[1]);
  }

  ActivationHook hook_;

 private:
  void emit(const char* name, int layer, const std::vector<float>& v, int rows, int cols) {
    if (hook_) hook_(name, layer, v.data(), rows, cols);
  }
  void embed_slots(const StepBatch& b, std::vector<float>& x);
  // x[src] += delta[src] (when delta), then RMSNorm or LayerNorm as the spec says of the rows
  // selected (null: all n_rows); weight / bias empty when the features omit them.
  void norm(float* x, const float* delta, const F32& weight, const F32& bias, const int32_t* rows,
            int n_rows, float* y) const {
    NormArgs a;
    a.t = DType::F32;
    a.x = x;
    a.delta = delta;
    a.rows = rows;
    a.n_rows = n_rows;
    a.dim = spec_.hidden;
    a.eps = spec_.rms_eps;
    a.out = y;
    if (spec_.norm == NormKind::Rms) {
      a.weight = weight.get() ? weight.get() : ones_.data();
      cpu::rms_norm_residual(a);
    } else {
      a.weight = weight.get();
      a.bias = bias.get();
      cpu::layer_norm_residual(a);
    }
  }

  ModelSpec spec_;
  std::vector<float> embed_;    // [vocab, hidden]
  std::vector<float> lm_head_;  // [vocab, hidden]
  F32 final_norm_;              // [hidden]
  F32 final_norm_bias_;         // [hidden]
  F32 pos_absolute_;            // [max_positions + position_offset, hidden]
  F32 pos_spatial_;             // [spatial_rows, hidden]
  F32 pos_temporal_;            // [temporal_rows, hidden]
  std::vector<CpuActionLayer> action_;
  std::vector<CpuLayer> layers_;
  std::vector<float> ones_;  // [hidden] the weight of a non-affine RMSNorm
  int block_size_ = 16, num_blocks_ = 0;
  std::vector<float> inv_freq_;  // [head_dim / 2] (rope.h rope_inv_freq)
  // The pool holds fp32; with fp8 each value's e4m3 round trip (rope_kv_write's reference),
  // what an FP8 cache gives back: the cpu backend is its reference.
  bool kv_fp8_ = false;
  std::vector<float> kv_scale_;  // [layers, 2, kv_heads]
  // loom calibrate (collect_kv_stats): [layers, 2, kv_heads] maxima, saturation scales (same
  // layout; empty: no count), counts [elements, saturated].
  bool stats_on_ = false;
  std::vector<float> stats_absmax_, stats_scales_;
  unsigned long long stats_counts_[2] = {0, 0};
};

// The slots' inputs from the references of the embed and positions families: the action
// projection of the action slots (first layer, then the hidden layers with ReLU between them),
// embed_assemble, then learned absolute positions.
void CpuBackend::embed_slots(const StepBatch& b, std::vector<float>& x) {
  const int n = b.n_slots(), H = spec_.hidden;
  std::vector<int32_t> act_slots, act_row(size_t(n), -1);  // [n_act], [n]
  for (int i = 0; i < n; i++) {
    const int32_t tok = b.tokens[size_t(i)];
    if (tok != kActionSlot) {
      LOOM_CHECK(tok >= 0 && tok < spec_.vocab, "step: token ", tok, " outside vocab ",
                 spec_.vocab);
    } else {
      LOOM_CHECK(!action_.empty(), "step: action slot given to a model without action projection");
      LOOM_CHECK(b.actions.size() >= size_t(i + 1) * size_t(spec_.action_dim),
                 "step: no action row for slot ", i);
      act_row[size_t(i)] = int32_t(act_slots.size());
      act_slots.push_back(i);
    }
    const int p = b.positions[size_t(i)];
    if (spec_.positions == PositionKind::SpatioTemporal)
      LOOM_CHECK(p / spec_.frame_slots() < spec_.temporal_rows, "step: position ", p,
                 " beyond the temporal table of ", spec_.temporal_rows, " frames");
    else if (spec_.positions == PositionKind::Absolute)
      LOOM_CHECK(p < spec_.max_positions, "step: position ", p,
                 " beyond the learned position table of ", spec_.max_positions, " positions");
  }

  // Linear, or an MLP with ReLU between its layers (V2): 3 → H → H → H.
  const int n_act = int(act_slots.size());
  std::vector<float> act, next;  // [n_act, layer out]
  if (n_act > 0) {
    const CpuActionLayer& first = action_[0];
    act.resize(size_t(n_act) * size_t(first.out));
    ActionInputArgs in;
    in.actions = b.actions.data();
    in.action_dim = spec_.action_dim;
    in.act_slots = act_slots.data();
    in.n_act = n_act;
    in.w = first.weight.data();
    in.b = first.bias.get();
    in.hidden = first.out;
    in.relu = action_.size() > 1;
    in.out_t = DType::F32;
    in.out = act.data();
    cpu::action_input_layer(in);
    for (size_t l = 1; l < action_.size(); l++) {
      const CpuActionLayer& al = action_[l];
      next.resize(size_t(n_act) * size_t(al.out));
      cpu::matmul_nt(act.data(), al.weight.data(), al.bias.get(), next.data(), n_act, al.out,
                     al.in);
      if (l + 1 < action_.size()) {
        BiasActivationArgs relu;
        relu.t = DType::F32;
        relu.y = next.data();
        relu.rows = n_act;
        relu.n = al.out;
        relu.apply_act = true;
        relu.act = Activation::Relu;
        cpu::bias_activation(relu);
      }
      act.swap(next);
    }
  }

  EmbedArgs e;
  e.t = DType::F32;
  e.tokens = b.tokens.data();
  e.positions = b.positions.data();
  e.act_row = act_row.data();
  e.embed = embed_.data();
  e.act_out = act.data();
  if (spec_.positions == PositionKind::SpatioTemporal) {
    e.pos_spatial = pos_spatial_.get();
    e.pos_temporal = pos_temporal_.get();
    e.frame_slots = spec_.frame_slots();
    e.spatial_rows = spec_.spatial_rows;
    e.temporal_rows = spec_.temporal_rows;
  }
  e.vocab = spec_.vocab;
  e.n_slots = n;
  e.hidden = H;
  e.x = x.data();
  cpu::embed_assemble(e);
  if (spec_.positions == PositionKind::Absolute) {
    PositionsArgs p;
    p.x = x.data();
    p.positions = b.positions.data();
    p.table = pos_absolute_.get();
    p.offset = spec_.position_offset;
    p.table_rows = spec_.max_positions + spec_.position_offset;
    p.n_slots = n;
    p.hidden = H;
    cpu::add_absolute_positions(p);
  }
}

void CpuBackend::step(const StepBatch& b, StepOutput& out) {
  const int n = b.n_slots(), H = spec_.hidden, qd = spec_.q_dim(), kvd = spec_.kv_dim();
  const int I = spec_.intermediate, hd = spec_.head_dim;
  const int qkv_dim = qd + 2 * kvd;
  std::vector<float> x(size_t(n) * size_t(H));          // [n, hidden] residual stream
  std::vector<float> h(size_t(n) * size_t(H));          // [n, hidden] normed
  std::vector<float> qkv(size_t(n) * size_t(qkv_dim));  // [n, q_dim + 2 kv_dim]
  std::vector<float> attn(size_t(n) * size_t(qd));      // [n, heads, head_dim]
  std::vector<float> proj(size_t(n) * size_t(H));       // [n, hidden]
  std::vector<float> gu(size_t(n) * 2 * size_t(I));     // [n, 2 inter]
  std::vector<float> act(size_t(n) * size_t(I));        // [n, inter]

  // Per slot its flat cache row; per sequence one attention tile of all its new slots.
  std::vector<int32_t> cache_slot(static_cast<size_t>(n)), tiles;  // [n], [n_seqs, 3]
  for (int s = 0; s < b.n_seqs(); s++) {
    const int first = b.slot_start[size_t(s)], count = b.slot_start[size_t(s) + 1] - first;
    const int32_t* table = b.block_tables.data() + size_t(s) * size_t(b.blocks_per_seq);
    const int kv_len = b.kv_len[size_t(s)];
    LOOM_CHECK((kv_len + count + block_size_ - 1) / block_size_ <= b.blocks_per_seq,
               "step: sequence ", s, " needs more blocks than its table holds");
    for (int j = 0; j < count; j++)
      cache_slot[size_t(first + j)] =
          table[(kv_len + j) / block_size_] * block_size_ + (kv_len + j) % block_size_;
    tiles.insert(tiles.end(), {s, 0, count});
  }

  embed_slots(b, x);
  emit("embed", -1, x, n, H);
  for (int L = 0; L < spec_.layers; L++) {
    CpuLayer& l = layers_[size_t(L)];
    norm(x.data(), nullptr, l.attn_norm, l.attn_norm_bias, nullptr, n, h.data());
    cpu::matmul_nt(h.data(), l.qkv.get(), l.qkv_bias.get(), qkv.data(), n, qkv_dim, H);
    const size_t ls = size_t(L) * 2 * spec_.kv_heads;  // this layer's scales
    RopeKvArgs r;
    r.t = DType::F32;
    r.kv_fp8 = kv_fp8_;
    r.kv_scale = kv_scale_.data() + ls;
    r.qkv = qkv.data();
    r.positions = b.positions.data();
    r.cache_slot = cache_slot.data();
    r.inv_freq = inv_freq_.data();
    r.n_slots = n;
    r.heads = spec_.heads;
    r.kv_heads = spec_.kv_heads;
    r.head_dim = hd;
    r.k_cache = l.k_cache.get();
    r.v_cache = l.v_cache.get();
    cpu::rope_kv_write(r);
    if (stats_on_) {
      KvStatsArgs k;
      k.t = DType::F32;
      k.k_cache = l.k_cache.get();
      k.v_cache = l.v_cache.get();
      k.cache_slot = cache_slot.data();
      k.n_slots = n;
      k.kv_heads = spec_.kv_heads;
      k.head_dim = hd;
      k.absmax = stats_absmax_.data() + ls;
      k.scales = stats_scales_.empty() ? nullptr : stats_scales_.data() + ls;
      k.counts = stats_counts_;
      cpu::kv_stats(k);
    }
    AttentionArgs a;
    a.t = DType::F32;
    a.qkv = qkv.data();
    a.k_cache = l.k_cache.get();
    a.v_cache = l.v_cache.get();
    a.block_tables = b.block_tables.data();
    a.bt_stride = b.blocks_per_seq;
    a.kv_len = b.kv_len.data();
    a.slot_start = b.slot_start.data();
    a.tiles = tiles.data();
    a.n_tiles = b.n_seqs();
    a.heads = spec_.heads;
    a.kv_heads = spec_.kv_heads;
    a.head_dim = hd;
    a.block_size = block_size_;
    a.out = attn.data();
    cpu::paged_attention(a);
    emit("attn", L, attn, n, qd);
    cpu::matmul_nt(attn.data(), l.o.get(), l.o_bias.get(), proj.data(), n, H, qd);
    norm(x.data(), proj.data(), l.mlp_norm, l.mlp_norm_bias, nullptr, n, h.data());
    if (spec_.mlp == MlpKind::SwiGlu) {
      cpu::matmul_nt(h.data(), l.gate_up.get(), l.gate_up_bias.get(), gu.data(), n, 2 * I, H);
      ActMulArgs am;
      am.t = DType::F32;
      am.gate_up = gu.data();
      am.out = act.data();
      am.rows = n;
      am.inter = I;
      am.act = spec_.act;
      cpu::act_mul(am);
    } else {
      // The bias is added inside matmul_nt, the activation after it.
      cpu::matmul_nt(h.data(), l.up.get(), l.up_bias.get(), act.data(), n, I, H);
      BiasActivationArgs ba;
      ba.t = DType::F32;
      ba.y = act.data();
      ba.rows = n;
      ba.n = I;
      ba.apply_act = true;
      ba.act = spec_.act;
      cpu::bias_activation(ba);
    }
    cpu::matmul_nt(act.data(), l.down.get(), l.down_bias.get(), proj.data(), n, H, I);
    for (size_t i = 0; i < x.size(); i++) x[i] += proj[i];
    emit("layer_out", L, x, n, H);
  }

  const int S = b.n_seqs(), V = spec_.vocab;
  out.tokens.assign(size_t(S), -1);
  if (b.want_logits) out.logits.assign(size_t(S) * size_t(V), 0.0f);
  std::vector<float> last(static_cast<size_t>(H));    // [hidden]
  std::vector<float> logits(static_cast<size_t>(V));  // [vocab]
  for (int s = 0; s < S; s++) {
    if (!b.sample[size_t(s)] && !b.want_logits) continue;
    const int32_t slot = b.slot_start[size_t(s) + 1] - 1;
    norm(x.data(), nullptr, final_norm_, final_norm_bias_, &slot, 1, last.data());
    cpu::matmul_nt(last.data(), lm_head_.data(), nullptr, logits.data(), 1, V, H);
    if (b.want_logits) std::copy(logits.begin(), logits.end(), out.logits.begin() + long(s) * V);
    // Sampled ids are image tokens: only [sample_begin, sample_end) of the vocab competes.
    const int lo = spec_.sample_begin(), hi = spec_.sample_end();
    if (b.sample[size_t(s)])
      out.tokens[size_t(s)] = lo + sample_token(logits.data() + lo, hi - lo, b.sampling[size_t(s)],
                                                b.sample_index[size_t(s)], b.draw_index[size_t(s)]);
  }
}

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() {
  return std::make_unique<CpuBackend>();
}

void set_cpu_activation_hook(Backend& backend, ActivationHook hook) {
  auto* cpu = dynamic_cast<CpuBackend*>(&backend);
  LOOM_CHECK(cpu != nullptr, "activation hooks exist only on the cpu backend");
  cpu->hook_ = std::move(hook);
}

}  // namespace loom
