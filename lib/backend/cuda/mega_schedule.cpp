// build_mega_schedule and check_mega_schedule (mega_schedule.h). The checker recomputes
// everything from the lists and the contracts of kernels/mega/instructions.h; it trusts
// neither the builder's bookkeeping nor its expected counts.
#include "backend/cuda/mega_schedule.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"

namespace loom::mega {
namespace {

constexpr int kLayerOps = 6;  // Qkv, AttnPartial, AttnReduce, OProj, GateUp, Down

struct OpInstance {
  MegaOp op;
  int layer;
};

// Every op instance of a step, in forward order.
std::vector<OpInstance> op_instances(const MegaDims& d) {
  std::vector<OpInstance> v{{MegaOp::Embed, 0}};
  for (int l = 0; l < d.layers; l++)
    for (int k = 0; k < kLayerOps; k++) v.push_back({MegaOp(int(MegaOp::Qkv) + k), l});
  for (MegaOp op : {MegaOp::FinalNorm, MegaOp::LmHead, MegaOp::Draw}) v.push_back({op, 0});
  return v;
}

// Position of (op, layer) in op_instances.
int instance_index(const MegaDims& d, MegaOp op, int layer) {
  if (op == MegaOp::Embed) return 0;
  if (mega_per_layer(op)) return 1 + layer * kLayerOps + (int(op) - int(MegaOp::Qkv));
  return 1 + d.layers * kLayerOps + (int(op) - int(MegaOp::FinalNorm));
}

std::string op_name(MegaOp op, int layer) {
  return mega_per_layer(op) ? cat(mega_op_name(op), " layer ", layer) : mega_op_name(op);
}

// Bytes one unit streams: weights for the GEMV tiles (what bounds a decode step), activations
// or one partition of K and V for the others (nominal: attention's real cost follows kv_len).
double unit_bytes(const MegaDims& d, MegaOp op, double elt) {
  const double G = d.group_size(), hd = d.head_dim;
  switch (op) {
    case MegaOp::Embed:
      return double(d.embed_cols) * d.batch * elt;
    case MegaOp::Qkv:
    case MegaOp::OProj:
      return double(d.rows_per_tile) * (op == MegaOp::Qkv ? d.hidden : d.q_dim()) * elt;
    case MegaOp::GateUp:
      return double(d.rows_per_tile) * d.hidden * elt;
    case MegaOp::Down:
      return double(d.rows_per_tile) * d.intermediate * elt;
    case MegaOp::LmHead:
      return double(d.lm_rows_per_tile) * d.hidden * elt;
    case MegaOp::AttnPartial:
      return 2.0 * kMegaPartitionKeys * hd * elt;
    case MegaOp::AttnReduce:
      return d.attn_splits * G * (hd + 2) * 4.0;
    case MegaOp::FinalNorm:
      return d.hidden * 4.0;
    case MegaOp::Draw:
      return mega_units(d, MegaOp::LmHead) * 8.0;
  }
  return 0;
}

void check_model(const ModelSpec& s, int batch, int num_sms, const MegaOptions& o) {
  const std::string who = cat(" (", s.architecture.empty() ? "model" : s.architecture, ")");
  LOOM_CHECK(batch >= 1 && batch <= kMegaMaxBatch, "megakernel: batch ", batch, " is outside 1..",
             kMegaMaxBatch);
  LOOM_CHECK(num_sms >= 1, "megakernel: num_sms ", num_sms, " must be at least 1");
  LOOM_CHECK(s.norm == NormKind::Rms, "megakernel: LayerNorm models are not supported", who,
             "; the graph path runs them");
  LOOM_CHECK(s.norm_affine, "megakernel: an RMSNorm without a scale is not supported", who);
  std::string biases;
  for (auto [on, name] : {std::pair{s.qkv_bias, "qkv_bias"}, std::pair{s.o_bias, "o_bias"},
                          std::pair{s.mlp_bias, "mlp_bias"}})
    if (on) biases += cat(biases.empty() ? "" : ", ", name);
  LOOM_CHECK(biases.empty(), "megakernel: biases are not supported (", biases, ")", who);
  LOOM_CHECK(s.mlp == MlpKind::SwiGlu && s.act == Activation::Silu,
             "megakernel: only the SwiGLU MLP with SiLU is supported", who);
  LOOM_CHECK(s.positions != PositionKind::Absolute,
             "megakernel: learned absolute positions are not supported", who);
  LOOM_CHECK(s.head_dim == 16 || s.head_dim == 64 || s.head_dim == 128, "megakernel: head_dim ",
             s.head_dim, " is not supported (16, 64 or 128)", who);
  LOOM_CHECK(s.kv_heads >= 1 && s.heads % s.kv_heads == 0 && s.heads / s.kv_heads <= 16,
             "megakernel: ", s.heads, " heads over ", s.kv_heads,
             " KV heads is not a GQA ratio of 1..16", who);
  LOOM_CHECK(s.hidden > 0 && s.hidden % 8 == 0 && s.intermediate > 0 && s.intermediate % 8 == 0,
             "megakernel: hidden ", s.hidden, " and intermediate ", s.intermediate,
             " must be positive multiples of 8 (16-byte weight rows)", who);
  LOOM_CHECK(s.layers >= 1 && s.layers <= 65535 && s.vocab >= 1, "megakernel: ", s.layers,
             " layers and vocab ", s.vocab, " are out of range", who);
  LOOM_CHECK(!(o.action_slots && s.action_projection == ActionProjection::Mlp),
             "megakernel: action slots of an MLP action projection are not supported (",
             s.action_mlp_layers, " layers); the graph path runs those steps", who);
  LOOM_CHECK(o.weight_t == DType::BF16 || o.weight_t == DType::F32, "megakernel: weights of ",
             dtype_name(o.weight_t), " are not supported (bf16 or f32)");
  LOOM_CHECK(o.rows_per_tile > 0 && o.rows_per_tile % 2 == 0 &&
                 o.rows_per_tile <= kMegaMaxTileRows && s.head_dim % o.rows_per_tile == 0,
             "megakernel: rows_per_tile ", o.rows_per_tile, " must be even, at most ",
             kMegaMaxTileRows, " and divide head_dim ", s.head_dim, " (a tile holds RoPE pairs)");
  LOOM_CHECK(o.lm_rows_per_tile > 0 && o.embed_cols > 0 && o.attn_splits >= 0,
             "megakernel: lm_rows_per_tile ", o.lm_rows_per_tile, ", embed_cols ", o.embed_cols,
             " must be positive and attn_splits ", o.attn_splits, " not negative");
}

}  // namespace

MegaSchedule build_mega_schedule(const ModelSpec& spec, int batch, int num_sms,
                                 const MegaOptions& o) {
  check_model(spec, batch, num_sms, o);
  MegaSchedule s;
  MegaDims& d = s.dims;
  d.layers = spec.layers;
  d.hidden = spec.hidden;
  d.heads = spec.heads;
  d.kv_heads = spec.kv_heads;
  d.head_dim = spec.head_dim;
  d.intermediate = spec.intermediate;
  d.vocab = spec.vocab;
  d.batch = batch;
  d.rows_per_tile = o.rows_per_tile;
  d.lm_rows_per_tile = o.lm_rows_per_tile;
  d.embed_cols = o.embed_cols;
  // Enough splits that the attention units of a layer cover the SMs once; at batch 1 on
  // Terra, 32 splits of 57 partitions at the longest context (14,550 keys).
  d.attn_splits = o.attn_splits > 0
                      ? o.attn_splits
                      : std::clamp(num_sms / (batch * spec.kv_heads), 1, kMegaMaxSplits);
  s.num_sms = num_sms;
  s.programs.resize(size_t(num_sms));
  s.sm_bytes.assign(size_t(num_sms), 0.0);

  const double elt = double(dtype_size(o.weight_t));
  std::vector<int> order(static_cast<size_t>(num_sms));
  std::vector<char> extra_unit(static_cast<size_t>(num_sms));
  for (const OpInstance& inst : op_instances(d)) {
    const int n = mega_units(d, inst.op);
    const double bytes = unit_bytes(d, inst.op, elt);
    const int base = n / num_sms, extra = n % num_sms;
    // The extra units go to the SMs that have streamed the fewest bytes so far (ties: lower
    // SM index), so an SM that took one more tile of this op takes one fewer later.
    std::fill(extra_unit.begin(), extra_unit.end(), 0);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return s.sm_bytes[size_t(a)] < s.sm_bytes[size_t(b)]; });
    if (inst.op == MegaOp::AttnPartial && base == 0) {
      // One split an SM: the splits likeliest to have a partition (a context fills splits 0,
      // 1, … first) go to the SMs that reach their attention first: one qkv tile this layer
      // (not two), then the least loaded.
      auto qkv_tiles = [&](int sm) {
        const auto& prog = s.programs[size_t(sm)];
        const bool own = !prog.empty() && MegaOp(prog.back().op) == MegaOp::Qkv &&
                         prog.back().layer == inst.layer;
        return own ? int(prog.back().end - prog.back().begin) : 0;
      };
      std::stable_sort(order.begin(), order.end(),
                       [&](int a, int b) { return qkv_tiles(a) < qkv_tiles(b); });
      std::vector<int> units(static_cast<size_t>(n));
      std::iota(units.begin(), units.end(), 0);
      std::stable_sort(units.begin(), units.end(),
                       [&](int a, int b) { return a % d.attn_splits < b % d.attn_splits; });
      for (int i = 0; i < n; i++) {
        const int sm = order[size_t(i)];
        MegaInstruction in;
        in.op = uint8_t(inst.op);
        in.layer = uint16_t(inst.layer);
        in.begin = uint32_t(units[size_t(i)]);
        in.end = in.begin + 1;
        s.programs[size_t(sm)].push_back(in);
        s.sm_bytes[size_t(sm)] += bytes;
      }
      continue;
    }
    for (int i = 0; i < extra; i++) extra_unit[size_t(order[size_t(i)])] = 1;
    uint32_t next = 0;
    for (int sm = 0; sm < num_sms; sm++) {
      const int count = base + extra_unit[size_t(sm)];
      if (count == 0) continue;
      MegaInstruction in;
      in.op = uint8_t(inst.op);
      in.layer = uint16_t(inst.layer);
      in.begin = next;
      in.end = next + uint32_t(count);
      s.programs[size_t(sm)].push_back(in);
      s.sm_bytes[size_t(sm)] += count * bytes;
      next = in.end;
    }
  }

  s.expected.assign(size_t(s.num_counters()), 0);
  for (const OpInstance& inst : op_instances(d))
    for (int g = 0; g < mega_groups(d, inst.op); g++)
      s.expected[mega_counter(d, inst.op, inst.layer, g)] = mega_group_units(d, inst.op);
  return s;
}

namespace {

// The units of a whole step, numbered op instance by op instance in forward order.
struct UnitSpace {
  std::vector<OpInstance> insts;
  std::vector<int64_t> base;  // [insts + 1] first unit id of each instance

  explicit UnitSpace(const MegaDims& d) : insts(op_instances(d)) {
    base.push_back(0);
    for (const OpInstance& i : insts) base.push_back(base.back() + mega_units(d, i.op));
  }
  int64_t total() const { return base.back(); }
};

std::string where(int sm, size_t i, const MegaInstruction& in) {
  return cat("SM ", sm, " instruction ", i, " (", op_name(MegaOp(in.op), in.layer), ", units ",
             in.begin, "..", int64_t(in.end) - 1, ")");
}

std::string unit_name(MegaOp op, int layer, int u) {
  return cat(op_name(op, layer), " unit ", u);
}

// Names of the counters, checking that the layout gives each (op, layer, group) its own index.
std::string counter_layout_error(const MegaDims& d, std::vector<std::string>* names) {
  const uint32_t nc = uint32_t(mega_num_counters(d));
  names->assign(nc, "");
  for (const OpInstance& i : op_instances(d))
    for (int g = 0; g < mega_groups(d, i.op); g++) {
      const uint32_t c = mega_counter(d, i.op, i.layer, g);
      const std::string name =
          cat(op_name(i.op, i.layer), mega_groups(d, i.op) > 1 ? cat(" group ", g) : "");
      if (c >= nc) return cat("counter layout: ", name, " maps to index ", c, " of ", nc);
      std::string& slot = (*names)[c];
      if (!slot.empty()) return cat("counter layout: ", name, " and ", slot, " share index ", c);
      slot = name;
    }
  for (uint32_t c = 0; c < nc; c++)
    if ((*names)[c].empty()) return cat("counter layout: index ", c, " belongs to no op");
  return "";
}

std::string counter_text(const std::vector<std::string>& names, uint32_t c) {
  return cat("counter ", c, " (", c < names.size() ? names[c] : "out of range", ")");
}

std::string instruction_error(const MegaSchedule& s) {
  const MegaDims& d = s.dims;
  if (int(s.programs.size()) != s.num_sms)
    return cat("the schedule has ", s.programs.size(), " programs for ", s.num_sms, " SMs");
  if (s.expected.size() != size_t(s.num_counters()))
    return cat("the schedule expects counts for ", s.expected.size(), " counters of ",
               s.num_counters());
  for (int sm = 0; sm < s.num_sms; sm++)
    for (size_t i = 0; i < s.programs[size_t(sm)].size(); i++) {
      const MegaInstruction& in = s.programs[size_t(sm)][i];
      if (in.op >= kMegaOps) return cat("SM ", sm, " instruction ", i, ": unknown op ", in.op);
      const MegaOp op = MegaOp(in.op);
      if (mega_per_layer(op) ? in.layer >= d.layers : in.layer != 0)
        return cat(where(sm, i, in), ": layer out of range (", d.layers, " layers)");
      if (in.begin >= in.end || in.end > uint32_t(mega_units(d, op)))
        return cat(where(sm, i, in), ": not a unit range of its ", mega_units(d, op), " units");
      if (in.reserved != 0 || in.pad != 0)
        return cat(where(sm, i, in), ": reserved fields must be zero");
    }
  return "";
}

std::string coverage_error(const MegaSchedule& s, const UnitSpace& space) {
  const MegaDims& d = s.dims;
  std::vector<int32_t> owner_sm(size_t(space.total()), -1), owner_i(size_t(space.total()), -1);
  for (int sm = 0; sm < s.num_sms; sm++)
    for (size_t i = 0; i < s.programs[size_t(sm)].size(); i++) {
      const MegaInstruction& in = s.programs[size_t(sm)][i];
      const int64_t base = space.base[size_t(instance_index(d, MegaOp(in.op), in.layer))];
      for (uint32_t u = in.begin; u < in.end; u++) {
        const size_t id = size_t(base + u);
        if (owner_sm[id] >= 0)
          return cat(unit_name(MegaOp(in.op), in.layer, int(u)), " is covered twice: SM ",
                     owner_sm[id], " instruction ", owner_i[id], " and SM ", sm, " instruction ",
                     i);
        owner_sm[id] = sm;
        owner_i[id] = int32_t(i);
      }
    }
  for (size_t k = 0; k < space.insts.size(); k++)
    for (int64_t id = space.base[k]; id < space.base[k + 1]; id++)
      if (owner_sm[size_t(id)] < 0)
        return cat(unit_name(space.insts[k].op, space.insts[k].layer, int(id - space.base[k])),
                   " is not covered");
  return "";
}

std::string count_error(const MegaSchedule& s, const UnitSpace& space,
                        const std::vector<std::string>& names, MegaWaitFn wait) {
  const MegaDims& d = s.dims;
  const uint32_t nc = uint32_t(s.num_counters());
  std::vector<uint32_t> publishers(nc, 0);
  for (const OpInstance& i : space.insts)
    for (int u = 0; u < mega_units(d, i.op); u++) {
      const uint32_t p = mega_publish(d, i.op, i.layer, u);
      if (p == kMegaNoCounter) continue;
      if (p >= nc)
        return cat(unit_name(i.op, i.layer, u), " publishes to ", counter_text(names, p));
      publishers[p]++;
    }
  for (uint32_t c = 0; c < nc; c++)
    if (publishers[c] != s.expected[c])
      return cat(counter_text(names, c), " is expected to reach ", s.expected[c], " a step, but ",
                 publishers[c], " units publish to it");
  for (const OpInstance& i : space.insts)
    for (int u = 0; u < mega_units(d, i.op); u++) {
      const MegaWait w = wait(d, i.op, i.layer, u);
      if (w.counter == kMegaNoCounter) continue;
      if (w.counter >= nc || w.count != s.expected[w.counter])
        return cat(unit_name(i.op, i.layer, u), " waits for ", w.count, " on ",
                   counter_text(names, w.counter), ", which reaches ",
                   w.counter < nc ? s.expected[w.counter] : 0, " a step");
    }
  return "";
}

}  // namespace

namespace {

// The checks every later one relies on (indices in range, counts consistent).
std::string basic_error(const MegaSchedule& s, MegaWaitFn wait, std::vector<std::string>* names) {
  std::string e = instruction_error(s);
  if (e.empty()) e = counter_layout_error(s.dims, names);
  if (e.empty()) e = count_error(s, UnitSpace(s.dims), *names, wait);
  return e;
}

}  // namespace

// --- Hazards: the forward pass's reads and writes, ordered by the waits alone --------------

namespace {

enum Buffer { kX, kQkv, kCache, kPartials, kAttn, kGu, kHLast, kLogits, kTokens };
const char* const kBufferNames[] = {"x",     "qkv",     "the KV cache", "attention partials",
                                    "attn",  "gate_up", "h_last",       "logits",
                                    "tokens"};

// A set of units of one op instance touching one region of a buffer: the counters they publish
// to and the counters they wait on.
struct Access {
  std::string who;  // "o_proj layer 3"
  int instance = 0;
  Buffer buf = kX;
  int region = 0;  // KV head (qkv), layer · kv_heads + head (cache), slot · kv_heads + head
  bool write = false;
  std::vector<uint32_t> pubs, waits;
};

std::string region_text(const MegaDims& d, Buffer b, int r) {
  switch (b) {
    case kQkv:
      return cat(" of KV head ", r);
    case kCache:
      return cat(" of layer ", r / d.kv_heads, " KV head ", r % d.kv_heads);
    case kPartials:
      return cat(" of slot ", r / d.kv_heads, " KV head ", r % d.kv_heads);
    default:
      return "";
  }
}

// c is complete only after a is: some chain a → … → c of "a publisher of the next counter
// waits on this one" (parents: for each counter, the counters its publishers wait on).
bool completes_before(const std::vector<std::vector<uint32_t>>& parents, uint32_t a, uint32_t c) {
  if (a == kMegaNoCounter || c == kMegaNoCounter) return false;
  std::vector<char> seen(parents.size(), 0);
  std::vector<uint32_t> stack{c};
  while (!stack.empty()) {
    const uint32_t x = stack.back();
    stack.pop_back();
    if (x == a) return true;
    if (seen[x]) continue;
    seen[x] = 1;
    for (uint32_t p : parents[x]) stack.push_back(p);
  }
  return false;
}

// Every unit of `before` finishes before any unit of `after` starts.
bool ordered(const std::vector<std::vector<uint32_t>>& parents, const Access& before,
             const Access& after) {
  for (uint32_t p : before.pubs)
    for (uint32_t w : after.waits)
      if (!completes_before(parents, p, w)) return false;
  return !before.pubs.empty();
}

// The accesses of one op instance, reads before writes (o_proj reads x, then adds to it).
std::vector<Access> accesses(const MegaDims& d, OpInstance i, int instance, MegaWaitFn wait) {
  std::vector<Access> v;
  auto add = [&](Buffer b, int region, bool write, int u0, int u1, int group = -1) {
    Access a;
    a.who = op_name(i.op, i.layer);
    a.instance = instance;
    a.buf = b;
    a.region = region;
    a.write = write;
    for (int u = u0; u < u1; u++) {
      if (group >= 0 && mega_group_of(d, i.op, u) != group) continue;
      a.pubs.push_back(mega_publish(d, i.op, i.layer, u));
      a.waits.push_back(wait(d, i.op, i.layer, u).counter);
    }
    for (auto* set : {&a.pubs, &a.waits}) {
      std::sort(set->begin(), set->end());
      set->erase(std::unique(set->begin(), set->end()), set->end());
    }
    v.push_back(std::move(a));
  };
  const int n = mega_units(d, i.op), kv = d.kv_heads, splits = d.attn_splits;
  switch (i.op) {
    case MegaOp::Embed:
      add(kX, 0, true, 0, n);
      break;
    case MegaOp::Qkv:
      add(kX, 0, false, 0, n);
      for (int g = 0; g < kv; g++) {
        add(kQkv, g, true, 0, n, g);
        add(kCache, i.layer * kv + g, true, 0, n, g);
      }
      break;
    case MegaOp::AttnPartial:
      for (int r = 0; r < d.batch * kv; r++) {
        add(kQkv, r % kv, false, r * splits, (r + 1) * splits);
        add(kCache, i.layer * kv + r % kv, false, r * splits, (r + 1) * splits);
        add(kPartials, r, true, r * splits, (r + 1) * splits);
      }
      break;
    case MegaOp::AttnReduce:
      for (int r = 0; r < n; r++) add(kPartials, r, false, r, r + 1);
      add(kAttn, 0, true, 0, n);
      break;
    case MegaOp::OProj:
      add(kAttn, 0, false, 0, n);
      add(kX, 0, false, 0, n);
      add(kX, 0, true, 0, n);
      break;
    case MegaOp::GateUp:
      add(kX, 0, false, 0, n);
      add(kGu, 0, true, 0, n);
      break;
    case MegaOp::Down:
      add(kGu, 0, false, 0, n);
      add(kX, 0, false, 0, n);
      add(kX, 0, true, 0, n);
      break;
    case MegaOp::FinalNorm:
      add(kX, 0, false, 0, n);
      add(kHLast, 0, true, 0, n);
      break;
    case MegaOp::LmHead:
      add(kHLast, 0, false, 0, n);
      add(kLogits, 0, true, 0, n);
      break;
    case MegaOp::Draw:
      add(kLogits, 0, false, 0, n);
      add(kTokens, 0, true, 0, n);
      break;
  }
  return v;
}

}  // namespace

std::string mega_hazard_error(const MegaSchedule& s, MegaWaitFn wait) {
  std::vector<std::string> names;
  if (std::string e = basic_error(s, wait, &names); !e.empty()) return e;
  const MegaDims& d = s.dims;
  const std::vector<OpInstance> insts = op_instances(d);
  std::vector<std::vector<uint32_t>> parents(size_t(s.num_counters()));
  for (const OpInstance& i : insts)
    for (int u = 0; u < mega_units(d, i.op); u++) {
      const uint32_t p = mega_publish(d, i.op, i.layer, u), w = wait(d, i.op, i.layer, u).counter;
      if (p < parents.size() && w < parents.size()) parents[p].push_back(w);
    }
  for (auto& v : parents) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  }
  struct State {
    bool written = false;
    Access writer;
    std::vector<Access> readers;  // since the last write
  };
  std::vector<std::vector<State>> state(9);
  state[kQkv].resize(size_t(d.kv_heads));
  state[kCache].resize(size_t(d.layers * d.kv_heads));
  state[kPartials].resize(size_t(d.batch * d.kv_heads));
  for (int b : {kX, kAttn, kGu, kHLast, kLogits, kTokens}) state[size_t(b)].resize(1);
  for (size_t k = 0; k < insts.size(); k++)
    for (Access& a : accesses(d, insts[k], int(k), wait)) {
      State& st = state[a.buf][size_t(a.region)];
      const std::string what = cat(kBufferNames[a.buf], region_text(d, a.buf, a.region));
      if (st.written && st.writer.instance != a.instance && !ordered(parents, st.writer, a))
        return cat(a.who, a.write ? " overwrites " : " reads ", what, " written by ", st.writer.who,
                   " without waiting for it");
      if (!a.write) {
        st.readers.push_back(std::move(a));
        continue;
      }
      for (const Access& r : st.readers)
        if (r.instance != a.instance && !ordered(parents, r, a))
          return cat(a.who, " overwrites ", what, " before ", r.who,
                     " has read it (no wait orders them)");
      st.readers.clear();
      st.written = true;
      st.writer = std::move(a);
    }
  return "";
}

// --- Global order (Kahn) and the persistent execution ----------------------------------

namespace {

// The units of every SM's list in program order: (sm, instruction, op, layer, unit).
struct ProgramUnit {
  int sm;
  int instruction;
  MegaOp op;
  int layer;
  int unit;
};

std::vector<ProgramUnit> program_units(const MegaSchedule& s) {
  std::vector<ProgramUnit> v;
  for (int sm = 0; sm < s.num_sms; sm++)
    for (size_t i = 0; i < s.programs[size_t(sm)].size(); i++) {
      const MegaInstruction& in = s.programs[size_t(sm)][i];
      for (uint32_t u = in.begin; u < in.end; u++)
        v.push_back({sm, int(i), MegaOp(in.op), in.layer, int(u)});
    }
  return v;
}

}  // namespace

std::string mega_order_error(const MegaSchedule& s, MegaWaitFn wait) {
  std::vector<std::string> names;
  if (std::string e = basic_error(s, wait, &names); !e.empty()) return e;
  const MegaDims& d = s.dims;
  const std::vector<ProgramUnit> units = program_units(s);
  const size_t nu = units.size(), nc = size_t(s.num_counters());
  // Nodes: the units, then one node per counter that becomes ready when all its publishers
  // ran (so a wait is one edge, not one per producer). Edges: program order on each SM,
  // unit → its publish counter, counter → every unit waiting on it.
  std::vector<std::vector<uint32_t>> waiters(nc);
  std::vector<uint32_t> indegree(nu + nc, 0);
  std::vector<uint32_t> publish(nu);
  for (size_t k = 0; k < nu; k++) {
    const ProgramUnit& p = units[k];
    publish[k] = mega_publish(d, p.op, p.layer, p.unit);
    if (publish[k] != kMegaNoCounter) indegree[nu + publish[k]]++;
    const uint32_t w = wait(d, p.op, p.layer, p.unit).counter;
    if (w != kMegaNoCounter) {
      waiters[w].push_back(uint32_t(k));
      indegree[k]++;
    }
    if (k > 0 && units[k - 1].sm == p.sm) indegree[k]++;
  }
  std::vector<uint32_t> ready;
  for (size_t n = 0; n < nu + nc; n++)
    if (indegree[n] == 0) ready.push_back(uint32_t(n));
  size_t done = 0;
  auto release = [&](uint32_t n) {
    if (--indegree[n] == 0) ready.push_back(n);
  };
  while (!ready.empty()) {
    const uint32_t n = ready.back();
    ready.pop_back();
    done++;
    if (n >= nu) {
      for (uint32_t k : waiters[n - nu]) release(k);
      continue;
    }
    if (n + 1 < nu && units[n + 1].sm == units[n].sm) release(n + 1);
    if (publish[n] != kMegaNoCounter) release(uint32_t(nu + publish[n]));
  }
  if (done == nu + nc) return "";
  size_t first = 0;
  while (first < nu && indegree[first] == 0) first++;
  size_t stuck = 0;
  for (size_t k = 0; k < nu; k++) stuck += indegree[k] != 0;
  if (first == nu) return "no global order: a counter never completes";
  const ProgramUnit& p = units[first];
  return cat("no global order is consistent with program order and the waits: ", stuck, " of ", nu,
             " units never become ready, the first SM ", p.sm, " instruction ", p.instruction, " (",
             unit_name(p.op, p.layer, p.unit), ")");
}

std::string mega_simulation_error(const MegaSchedule& s, int steps, uint32_t first_step,
                                  MegaSimulation* out, MegaWaitFn wait) {
  std::vector<std::string> names;
  if (std::string e = basic_error(s, wait, &names); !e.empty()) return e;
  const MegaDims& d = s.dims;
  MegaSimulation sim;
  sim.counters.resize(size_t(s.num_counters()));
  for (size_t c = 0; c < sim.counters.size(); c++) sim.counters[c] = first_step * s.expected[c];
  for (int step = 0; step < steps; step++) {
    const uint32_t epoch = first_step + uint32_t(step) + 1;  // as the CTAs read it at launch
    // Each CTA's position: instruction index and the unit inside it.
    std::vector<size_t> pc(size_t(s.num_sms), 0);
    std::vector<uint32_t> unit(size_t(s.num_sms), 0);
    for (int sm = 0; sm < s.num_sms; sm++)
      if (!s.programs[size_t(sm)].empty()) unit[size_t(sm)] = s.programs[size_t(sm)][0].begin;
    for (;;) {
      bool moved = false, finished = true;
      sim.passes++;
      for (int sm = 0; sm < s.num_sms; sm++) {
        const std::vector<MegaInstruction>& prog = s.programs[size_t(sm)];
        size_t& i = pc[size_t(sm)];
        uint32_t& u = unit[size_t(sm)];
        while (i < prog.size()) {
          const MegaOp op = MegaOp(prog[i].op);
          const MegaWait w = wait(d, op, prog[i].layer, int(u));
          if (w.counter != kMegaNoCounter &&
              !mega_reached(sim.counters[w.counter], mega_target(w, epoch)))
            break;
          const uint32_t p = mega_publish(d, op, prog[i].layer, int(u));
          if (p != kMegaNoCounter) sim.counters[p]++;
          sim.units_run++;
          moved = true;
          if (++u == prog[i].end && ++i < prog.size()) u = prog[i].begin;
        }
        finished = finished && i == prog.size();
      }
      if (finished) break;
      if (moved) continue;
      for (int sm = 0; sm < s.num_sms; sm++) {
        const size_t i = pc[size_t(sm)];
        if (i == s.programs[size_t(sm)].size()) continue;
        const MegaInstruction& in = s.programs[size_t(sm)][i];
        const MegaWait w = wait(d, MegaOp(in.op), in.layer, int(unit[size_t(sm)]));
        return cat("step ", step + 1, " deadlocks: ", where(sm, i, in), " blocks at unit ",
                   unit[size_t(sm)], " on ", counter_text(names, w.counter), " at ",
                   sim.counters[w.counter] - (epoch - 1) * w.count, " of ", w.count);
      }
    }
    for (size_t c = 0; c < sim.counters.size(); c++)
      if (sim.counters[c] != epoch * s.expected[c])
        return cat("step ", step + 1, " ends with ", counter_text(names, uint32_t(c)), " at ",
                   sim.counters[c] - (epoch - 1) * s.expected[c], " of ", s.expected[c]);
  }
  if (out) *out = std::move(sim);
  return "";
}

std::string check_mega_schedule(const MegaSchedule& s, MegaWaitFn wait) {
  std::vector<std::string> names;
  std::string e = instruction_error(s);
  if (e.empty()) e = counter_layout_error(s.dims, &names);
  if (e.empty()) e = coverage_error(s, UnitSpace(s.dims));
  if (e.empty()) e = count_error(s, UnitSpace(s.dims), names, wait);
  if (!e.empty()) return e;
  if (e = mega_hazard_error(s, wait); !e.empty()) return e;
  if (e = mega_order_error(s, wait); !e.empty()) return e;
  return mega_simulation_error(s, 2, 0, nullptr, wait);
}

std::string mega_counter_name(const MegaDims& d, uint32_t c) {
  std::vector<std::string> names;
  const std::string e = counter_layout_error(d, &names);
  if (!e.empty()) return e;
  return c < names.size() ? names[c] : cat("index ", c, ", out of range");
}

}  // namespace loom::mega
