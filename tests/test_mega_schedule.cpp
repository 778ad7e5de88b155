// The megakernel's instruction lists (backend/cuda/mega_schedule.h) for Terra's dimensions
// and the tiny checkpoints', batches 1–8 and 132 (H100), 114 (H100 PCIe), 7 and 1 SMs:
// coverage, deadlock freedom (a global order by Kahn's algorithm and a simulated persistent
// execution), fixed values of the layout, the refusals, and broken schedules and contracts
// that the checker must name exactly.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <map>
#include <string>
#include <vector>

#include "backend/cuda/mega_schedule.h"
#include "core/error.h"
#include "model/mapping.h"
#include "tests/tiny_spec.h"

using namespace loom;
using namespace loom::mega;
using loom::test::terra_spec;

namespace {

ModelSpec tiny_spec(const std::string& name) {
  LoadOptions o;
  o.tables_dir = std::string(LOOM_SOURCE_DIR) + "/models";
  return load_model(std::string(LOOM_TESTDATA) + "/" + name, o).spec;
}

std::string error_of(const ModelSpec& s, int batch, int sms, const MegaOptions& o = {}) {
  try {
    build_mega_schedule(s, batch, sms, o);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// (op, layer) → how many times each unit is covered, counted from the lists alone.
std::map<std::pair<int, int>, std::vector<int>> coverage(const MegaSchedule& s) {
  std::map<std::pair<int, int>, std::vector<int>> hits;
  for (const auto& prog : s.programs)
    for (const MegaInstruction& in : prog) {
      auto& v = hits[{in.op, in.layer}];
      v.resize(size_t(mega_units(s.dims, MegaOp(in.op))));
      for (uint32_t u = in.begin; u < in.end; u++) v[u]++;
    }
  return hits;
}

int64_t total_units(const MegaDims& d) {
  int64_t n = 0;
  for (int op = 0; op < kMegaOps; op++)
    n += int64_t(mega_units(d, MegaOp(op))) * (mega_per_layer(MegaOp(op)) ? d.layers : 1);
  return n;
}

// Where on `sm` the instruction of (op, layer) sits, or -1.
int find(const MegaSchedule& s, int sm, MegaOp op, int layer) {
  const auto& p = s.programs[size_t(sm)];
  for (size_t i = 0; i < p.size(); i++)
    if (p[i].op == uint8_t(op) && p[i].layer == layer) return int(i);
  return -1;
}

// Contracts broken on purpose (the checker is run with them in place of mega_wait).
MegaWait gate_up_skips_o_proj(const MegaDims& d, MegaOp op, int layer, int u) {
  if (op == MegaOp::GateUp) return mega_wait_on(d, MegaOp::AttnReduce, layer, 0);
  return mega_wait(d, op, layer, u);
}
MegaWait o_proj_waits_short(const MegaDims& d, MegaOp op, int layer, int u) {
  MegaWait w = mega_wait(d, op, layer, u);
  if (op == MegaOp::OProj) w.count--;
  return w;
}

}  // namespace

TEST_CASE("mega schedule: every tile once, a global order and a full persistent run") {
  struct Model {
    std::string name;
    ModelSpec spec;
  };
  const std::vector<Model> models = {{"terra", terra_spec()},
                                     {"tiny_v1", tiny_spec("tiny_v1")},
                                     {"tiny_v2", tiny_spec("tiny_v2")},
                                     {"tiny_llama", tiny_spec("tiny_llama")},
                                     {"tiny_action_tokens", tiny_spec("tiny_action_tokens")}};
  for (const Model& m : models)
    for (int batch = 1; batch <= kMegaMaxBatch; batch++)
      for (int sms : {132, 114, 7, 1}) {
        CAPTURE(m.name);
        CAPTURE(batch);
        CAPTURE(sms);
        const MegaSchedule s = build_mega_schedule(m.spec, batch, sms);
        REQUIRE(int(s.programs.size()) == sms);
        // (a) coverage, counted here from the lists: every op instance present, every unit
        // once; and each SM holds ⌊n / sms⌋ or ⌈n / sms⌉ units of every op instance.
        const auto hits = coverage(s);
        CHECK(hits.size() == size_t(4 + 6 * m.spec.layers));  // embed, final norm, lm_head, draw
        for (const auto& [key, v] : hits) {
          CAPTURE(mega_op_name(MegaOp(key.first)));
          CAPTURE(key.second);
          CHECK(std::count(v.begin(), v.end(), 1) == int64_t(v.size()));
          const int n = int(v.size());
          for (int sm = 0; sm < sms; sm++) {
            const int i = find(s, sm, MegaOp(key.first), key.second);
            const int got = i < 0 ? 0
                                  : int(s.programs[size_t(sm)][size_t(i)].end -
                                        s.programs[size_t(sm)][size_t(i)].begin);
            CHECK(got >= n / sms);
            CHECK(got <= (n + sms - 1) / sms);
          }
        }
        // (b) the checker (coverage, counts, hazards, Kahn, simulation) finds nothing.
        CHECK(check_mega_schedule(s) == "");
        CHECK(mega_order_error(s) == "");
        // The simulated persistent kernel runs every unit once a step, and the counters end
        // at two steps' counts.
        MegaSimulation sim;
        CHECK(mega_simulation_error(s, 2, 0, &sim) == "");
        CHECK(sim.units_run == 2 * total_units(s.dims));
        for (size_t c = 0; c < s.expected.size(); c++) CHECK(sim.counters[c] == 2 * s.expected[c]);
      }
}

TEST_CASE("mega schedule: Terra at batch 1 on 132 SMs, fixed values") {
  const MegaSchedule s = build_mega_schedule(terra_spec(), 1, 132);
  const MegaDims& d = s.dims;
  CHECK(d.attn_splits == 32);                // 132 SMs / (1 slot · 4 KV heads), capped at 32
  CHECK(mega_units(d, MegaOp::Embed) == 8);  // 2048 / 256
  CHECK(mega_units(d, MegaOp::Qkv) == 160);  // (2048 + 2 · 256) / 16
  CHECK(mega_units(d, MegaOp::AttnPartial) == 128);  // 4 KV heads · 32 splits
  CHECK(mega_units(d, MegaOp::OProj) == 128);
  CHECK(mega_units(d, MegaOp::GateUp) == 704);   // 2 · 5632 / 16
  CHECK(mega_units(d, MegaOp::LmHead) == 4097);  // ⌈262145 / 64⌉
  // Counters: embed, 22 × (4 qkv + 4 partial groups + 4), final norm, lm_head.
  CHECK(s.num_counters() == 267);
  CHECK(s.sync_bytes() == 16 + 4 * 267);
  CHECK(mega_counter(d, MegaOp::OProj, 0, 0) == 10);  // 1 + 4 + 4 + 1
  CHECK(mega_counter(d, MegaOp::Qkv, 1, 2) == 15);    // 1 + 12 + 2
  CHECK(mega_counter(d, MegaOp::LmHead, 0, 0) == 266);
  // The names a trapped wait's message gives (cuda_mega.cpp).
  CHECK(mega_counter_name(d, 0) == "embed");
  CHECK(mega_counter_name(d, 15) == "qkv layer 1 group 2");
  CHECK(mega_counter_name(d, 10) == "o_proj layer 0");
  CHECK(mega_counter_name(d, 266) == "lm_head");
  CHECK(mega_counter_name(d, 267) == "index 267, out of range");
  // A KV group's qkv tiles: 8 query heads, k and v, 64 rows each, 16 rows a tile.
  CHECK(s.expected[mega_counter(d, MegaOp::Qkv, 0, 3)] == 40);
  CHECK(mega_group_of(d, MegaOp::Qkv, 39) == 1);   // rows 624..639: query head 9, group 1
  CHECK(mega_group_of(d, MegaOp::Qkv, 128) == 0);  // row 2048: k head 0
  CHECK(mega_group_of(d, MegaOp::Qkv, 159) == 3);  // rows 2544..2559: v head 3
  CHECK(s.expected[mega_counter(d, MegaOp::AttnPartial, 0, 2)] == 32);
  const MegaWait w = mega_wait(d, MegaOp::AttnPartial, 5, 70);  // unit 70: head 2, split 6
  CHECK(w.counter == mega_counter(d, MegaOp::Qkv, 5, 2));
  CHECK(w.count == 40);
  // Qkv tiles hold RoPE pairs: tile 5 (query head 1, its second of 4 tiles) has rows 8..15 and
  // their partners 40..47 of the head; a v head's tile the same pattern.
  CHECK(mega_qkv_row(d, 5, 0) == 64 + 8);
  CHECK(mega_qkv_row(d, 5, 7) == 64 + 15);
  CHECK(mega_qkv_row(d, 5, 8) == 64 + 40);
  CHECK(mega_qkv_row(d, 5, 15) == 64 + 47);
  CHECK(mega_qkv_row(d, 159, 15) == 2496 + 63);
  // Every row of the fused weight is some tile's row exactly once.
  std::vector<int> seen(size_t(d.qkv_rows()), 0);
  for (int u = 0; u < mega_units(d, MegaOp::Qkv); u++)
    for (int r = 0; r < d.rows_per_tile; r++) seen[size_t(mega_qkv_row(d, u, r))]++;
  CHECK(std::count(seen.begin(), seen.end(), 1) == d.qkv_rows());
  // With the tensor-core GEMVs a GateUp tile's 16-row items are 8 gate rows and their up
  // partners: tile 3's item 0 holds gate rows 24..31 and up rows 5632 + 24..31. Every row of
  // [gate; up] is some tile's row exactly once, at every tile height, with no row past it.
  CHECK(mega_gate_up_row(16, 5632, 3, 0) == 24);
  CHECK(mega_gate_up_row(16, 5632, 3, 7) == 31);
  CHECK(mega_gate_up_row(16, 5632, 3, 8) == 5632 + 24);
  CHECK(mega_gate_up_row(32, 5632, 1, 16) == 24);
  CHECK(mega_gate_up_row(32, 5632, 1, 31) == 5632 + 31);
  for (int R : {16, 32, 64})
    for (int inter : {5632, 160, 40}) {
      CAPTURE(R);
      CAPTURE(inter);
      std::vector<int> gu(size_t(2 * inter), 0);
      const int units = (2 * inter + R - 1) / R;
      int past = 0;
      for (int u = 0; u < units; u++)
        for (int r = 0; r < R; r++) {
          const int row = mega_gate_up_row(R, inter, u, r);
          if (row < 0) {
            past++;
            continue;
          }
          CHECK(((r & 8) != 0) == (row >= inter));  // up rows in the item's second group
          gu[size_t(row)]++;
        }
      CHECK(std::count(gu.begin(), gu.end(), 1) == 2 * inter);
      CHECK(past == units * R - 2 * inter);
    }
  // Embed's 8 tiles go to SMs 0–7; the 28 extra qkv tiles to SMs 8–35, which streamed
  // nothing yet: SM 0 has qkv unit 0, SM 8 units 8..9, SM 36 unit 64.
  const MegaInstruction e = s.programs[0][0];
  CHECK((e.op == uint8_t(MegaOp::Embed) && e.begin == 0 && e.end == 1));
  const MegaInstruction q0 = s.programs[0][1], q8 = s.programs[8][0], q36 = s.programs[36][0];
  CHECK((q0.op == uint8_t(MegaOp::Qkv) && q0.begin == 0 && q0.end == 1));
  CHECK((q8.op == uint8_t(MegaOp::Qkv) && q8.begin == 8 && q8.end == 10));
  CHECK((q36.op == uint8_t(MegaOp::Qkv) && q36.begin == 64 && q36.end == 65));
  // Bytes: the step streams every layer weight and the (tile-padded) lm_head once, and no SM
  // streams more than one tile above the mean.
  const double layer = (2560.0 * 2048 + 2048.0 * 2048 + 11264.0 * 2048 + 2048.0 * 5632) * 2;
  const double weights = 22 * layer + 4097.0 * 64 * 2048 * 2;
  double sum = 0, most = 0, gemv = 0;
  for (double b : s.sm_bytes) sum += b, most = std::max(most, b);
  for (const auto& prog : s.programs)
    for (const MegaInstruction& in : prog) {
      const MegaOp op = MegaOp(in.op);
      const double k = op == MegaOp::Down ? 5632 : 2048;
      const double rows = op == MegaOp::LmHead ? 64 : 16;
      if (op == MegaOp::Qkv || op == MegaOp::OProj || op == MegaOp::GateUp || op == MegaOp::Down ||
          op == MegaOp::LmHead)
        gemv += (in.end - in.begin) * rows * k * 2;
    }
  CHECK(gemv == weights);
  // The extra units go to the least loaded SMs, so no SM is above the mean by more than the
  // largest unit, an lm_head tile (~1.1% of an SM's 22.8 MB).
  CHECK(most - sum / 132 <= 64.0 * 2048 * 2);
  // Attention: splits 0–9 of each KV head (a 600-key context's, 64 keys each) sit on SMs with
  // one qkv tile in their layer, not on the 28 with two, which reach attention last.
  int busy_on_two = 0, busy = 0;
  for (const auto& prog : s.programs)
    for (const MegaInstruction& in : prog) {
      if (MegaOp(in.op) != MegaOp::AttnPartial || int(in.begin) % d.attn_splits >= 10) continue;
      busy++;
      for (const MegaInstruction& q : prog)
        if (MegaOp(q.op) == MegaOp::Qkv && q.layer == in.layer && q.end - q.begin == 2)
          busy_on_two++;
    }
  CHECK(busy == 22 * 4 * 10);
  CHECK(busy_on_two == 0);
}

TEST_CASE("mega schedule: counters wrap around uint32 without a reset") {
  // As if 2^32 − 1 steps had run: every counter starts at −expected (mod 2^32), the first
  // simulated step's targets are 0 and the second's wrap to `expected`.
  const MegaSchedule s = build_mega_schedule(tiny_spec("tiny_v1"), 3, 7);
  MegaSimulation sim;
  CHECK(mega_simulation_error(s, 2, 0xFFFFFFFFu, &sim) == "");
  CHECK(sim.units_run == 2 * total_units(s.dims));
  for (size_t c = 0; c < s.expected.size(); c++) CHECK(sim.counters[c] == s.expected[c]);
  CHECK(mega_reached(3u, 0xFFFFFFFEu));   // 3 is 5 past −2
  CHECK(!mega_reached(0xFFFFFFFEu, 3u));  // −2 is 5 short of 3
}

TEST_CASE("mega schedule: the checker names a missing tile, a duplicate and a wrong count") {
  const MegaSchedule good = build_mega_schedule(terra_spec(), 2, 7);
  REQUIRE(check_mega_schedule(good) == "");
  const int i = find(good, 3, MegaOp::Qkv, 5);
  REQUIRE(i >= 0);
  const MegaInstruction q = good.programs[3][size_t(i)];

  MegaSchedule missing = good;
  missing.programs[3][size_t(i)].end--;
  CHECK(check_mega_schedule(missing) == cat("qkv layer 5 unit ", q.end - 1, " is not covered"));

  MegaSchedule twice = good;
  twice.programs[6].push_back(q);
  CHECK(check_mega_schedule(twice) == cat("qkv layer 5 unit ", q.begin,
                                          " is covered twice: SM 3 instruction ", i,
                                          " and SM 6 instruction ", good.programs[6].size()));

  MegaSchedule out_of_range = good;
  out_of_range.programs[0][0].end = 9;  // embed has 8 tiles
  CHECK(check_mega_schedule(out_of_range) == cat("SM 0 instruction 0 (embed, units ",
                                                 good.programs[0][0].begin,
                                                 "..8): not a unit range of its 8 units"));

  MegaSchedule miscounted = good;
  const uint32_t o = mega_counter(good.dims, MegaOp::OProj, 0, 0);
  miscounted.expected[o]++;
  CHECK(check_mega_schedule(miscounted) ==
        cat("counter ", o,
            " (o_proj layer 0) is expected to reach 129 a step, but 128 units "
            "publish to it"));
  CHECK(check_mega_schedule(good, o_proj_waits_short) ==
        cat("o_proj layer 0 unit 0 waits for 7 on counter ",
            mega_counter(good.dims, MegaOp::AttnReduce, 0, 0),
            " (attn_reduce layer 0), which reaches 8 a step"));
}

TEST_CASE("mega schedule: a consumer before its producer on one SM deadlocks, and is named") {
  // Terra at batch 1 on 7 SMs: every SM holds o_proj and gate_up tiles of layer 0. Swapping
  // them on SM 0 makes its gate_up wait for its own o_proj tiles, queued behind it.
  MegaSchedule s = build_mega_schedule(terra_spec(), 1, 7);
  const int o = find(s, 0, MegaOp::OProj, 0), g = find(s, 0, MegaOp::GateUp, 0);
  REQUIRE(g == o + 1);
  std::swap(s.programs[0][size_t(o)], s.programs[0][size_t(g)]);
  const MegaInstruction gi = s.programs[0][size_t(o)], oi = s.programs[0][size_t(g)];
  // Never ready: SM 0's o_proj tiles, every gate_up tile of layer 0 (they wait for all of
  // o_proj), and every unit from down layer 0 on.
  int64_t stuck = oi.end - oi.begin, all = 0;
  for (const auto& prog : s.programs)
    for (const MegaInstruction& in : prog) {
      all += in.end - in.begin;
      const MegaOp op = MegaOp(in.op);
      const bool later = mega_per_layer(op)
                             ? (in.layer > 0 || op == MegaOp::GateUp || op == MegaOp::Down)
                             : op != MegaOp::Embed;
      if (later) stuck += in.end - in.begin;
    }
  const std::string order =
      cat("no global order is consistent with program order and the waits: ", stuck, " of ", all,
          " units never become ready, the first SM 0 instruction ", o, " (gate_up layer 0 unit ",
          gi.begin, ")");
  CHECK(mega_order_error(s) == order);
  CHECK(check_mega_schedule(s) == order);  // coverage, counts and hazards still hold
  // The persistent run stops there: SM 0's o_proj tiles never publish.
  const uint32_t oc = mega_counter(s.dims, MegaOp::OProj, 0, 0);
  CHECK(mega_simulation_error(s) ==
        cat("step 1 deadlocks: SM 0 instruction ", o, " (gate_up layer 0, units ", gi.begin, "..",
            gi.end - 1, ") blocks at unit ", gi.begin, " on counter ", oc, " (o_proj layer 0) at ",
            128 - (oi.end - oi.begin), " of 128"));
}

TEST_CASE("mega schedule: a contract that skips a dependency is a hazard, not a deadlock") {
  // gate_up waiting on attn_reduce instead of o_proj never deadlocks, so Kahn and the
  // simulation pass; only the read/write model sees it read x before o_proj added to it.
  const MegaSchedule s = build_mega_schedule(terra_spec(), 4, 114);
  CHECK(mega_order_error(s, gate_up_skips_o_proj) == "");
  CHECK(mega_simulation_error(s, 2, 0, nullptr, gate_up_skips_o_proj) == "");
  CHECK(mega_hazard_error(s, gate_up_skips_o_proj) ==
        "gate_up layer 0 reads x written by o_proj layer 0 without waiting for it");
  CHECK(check_mega_schedule(s, gate_up_skips_o_proj) ==
        "gate_up layer 0 reads x written by o_proj layer 0 without waiting for it");
  CHECK(mega_hazard_error(s) == "");
}

TEST_CASE("mega schedule: models and options the megakernel cannot run are refused by name") {
  const ModelSpec terra = terra_spec();
  const std::string who = " (LlamaActionForCausalLM)";
  CHECK(error_of(tiny_spec("tiny_opt"), 1, 132) ==
        "megakernel: LayerNorm models are not supported (OPTForCausalLM); the graph path runs "
        "them");
  CHECK(error_of(tiny_spec("tiny_gpt2"), 1, 132) ==
        "megakernel: LayerNorm models are not supported (GPT2LMHeadModel); the graph path runs "
        "them");
  ModelSpec m = terra;
  m.qkv_bias = m.mlp_bias = true;
  CHECK(error_of(m, 1, 132) == "megakernel: biases are not supported (qkv_bias, mlp_bias)" + who);
  m = terra;
  m.mlp = MlpKind::Plain;
  CHECK(error_of(m, 1, 132) == "megakernel: only the SwiGLU MLP with SiLU is supported" + who);
  m = terra;
  m.head_dim = 80;
  CHECK(error_of(m, 1, 132) == "megakernel: head_dim 80 is not supported (16, 64 or 128)" + who);
  m = terra;
  m.positions = PositionKind::Absolute;
  CHECK(error_of(m, 1, 132) == "megakernel: learned absolute positions are not supported" + who);
  m = terra;
  m.kv_heads = 5;
  CHECK(error_of(m, 1, 132) ==
        "megakernel: 32 heads over 5 KV heads is not a GQA ratio of 1..16" + who);
  CHECK(error_of(terra, 9, 132) == "megakernel: batch 9 is outside 1..8");
  CHECK(error_of(terra, 0, 132) == "megakernel: batch 0 is outside 1..8");
  CHECK(error_of(terra, 1, 0) == "megakernel: num_sms 0 must be at least 1");
  MegaOptions o;
  o.rows_per_tile = 24;
  CHECK(error_of(terra, 1, 132, o) ==
        "megakernel: rows_per_tile 24 must be even, at most 64 and divide head_dim 64 (a tile "
        "holds RoPE pairs)");
  o.rows_per_tile = 1;
  CHECK(error_of(terra, 1, 132, o) ==
        "megakernel: rows_per_tile 1 must be even, at most 64 and divide head_dim 64 (a tile "
        "holds RoPE pairs)");
  o = {};
  o.weight_t = DType::F16;
  CHECK(error_of(terra, 1, 132, o) == "megakernel: weights of f16 are not supported (bf16 or f32)");
  // tiny_v2 projects actions through a 3-layer MLP: its image steps run, its action steps not.
  o = {};
  o.action_slots = true;
  CHECK(error_of(tiny_spec("tiny_v2"), 2, 7, o) ==
        "megakernel: action slots of an MLP action projection are not supported (3 layers); the "
        "graph path runs those steps (LlamaActionV2ForCausalLM)");
  CHECK(error_of(tiny_spec("tiny_v2"), 2, 7) == "");
  CHECK(error_of(tiny_spec("tiny_v1"), 2, 7, o) == "");
}

TEST_CASE("mega schedule: the staged order of a GEMV input (what producers write for a copy)") {
  // [M, k] row-major without the tensor cores.
  CHECK(mega_xs_elem(false, 8, 2048, 3, 17) == 3 * 2048 + 17);
  // A fragments: per 32 columns and slot, lane t's 16 bytes hold columns 2t, 2t + 1, 2t + 8,
  // 2t + 9 of the first k-step, then the same of the second.
  CHECK(mega_xs_elem(true, 8, 2048, 0, 0) == 0);
  CHECK(mega_xs_elem(true, 8, 2048, 0, 1) == 1);
  CHECK(mega_xs_elem(true, 8, 2048, 0, 8) == 2);     // word 1 of lane 0
  CHECK(mega_xs_elem(true, 8, 2048, 0, 16) == 4);    // word 2: the second k-step
  CHECK(mega_xs_elem(true, 8, 2048, 0, 2) == 8);     // lane 1's first word
  CHECK(mega_xs_elem(true, 8, 2048, 1, 0) == 32);    // slot 1's 16 words after slot 0's
  CHECK(mega_xs_elem(true, 8, 2048, 0, 32) == 256);  // the next 32 columns after 8 slots'
  // Every (slot, column) has its own element and none is left out: a producer's writes cover
  // the consumer's copy exactly.
  for (int M : {4, 8})
    for (int k : {2048, 5632}) {
      CAPTURE(M);
      CAPTURE(k);
      std::vector<int> seen(size_t(M) * size_t(k), 0);
      for (int i = 0; i < M; i++)
        for (int c = 0; c < k; c++) {
          const size_t e = mega_xs_elem(true, M, k, i, c);
          if (e < seen.size()) seen[e]++;
        }
      CHECK(std::count(seen.begin(), seen.end(), 1) == M * k);
    }
}

TEST_CASE("mega schedule: the finest tiling (one RoPE pair a unit, 16-row lm_head units)") {
  // Every pair of layer GEMV rows its own unit: 8 times the default's units and counts.
  MegaOptions o;
  o.rows_per_tile = 2;
  o.lm_rows_per_tile = 16;
  for (int batch : {1, 2, 4, 8}) {
    CAPTURE(batch);
    const MegaSchedule s = build_mega_schedule(terra_spec(), batch, 132, o);
    CHECK(mega_units(s.dims, MegaOp::Qkv) == 1280);       // (2048 + 2 · 256) / 2
    CHECK(mega_group_units(s.dims, MegaOp::Qkv) == 320);  // (8 + 2) · 64 rows a KV head / 2
    CHECK(mega_units(s.dims, MegaOp::GateUp) == 5632);
    CHECK(mega_units(s.dims, MegaOp::LmHead) == 16385);  // ⌈262145 / 16⌉
    CHECK(check_mega_schedule(s) == "");
  }
}

TEST_CASE("mega schedule: the tensor-core GEMVs' weight maps, one a weight and one a short tail") {
  // Terra: k of 2048 (qkv, o, gate_up, lm_head) streams whole 256-column segments per k part;
  // down's 5632 / 8 = 704 columns end in a 192-column segment, read through its tail map.
  const MegaDims t = build_mega_schedule(terra_spec(), 8, 132).dims;
  CHECK(mega_mma_fits(2048));
  CHECK(mega_mma_fits(5632));
  CHECK_FALSE(mega_mma_fits(256));  // a k part of 32 columns: half a 128-byte box
  CHECK_FALSE(mega_mma_tail(2048));
  CHECK(mega_mma_tail(5632));
  CHECK(mega_tmaps_per_layer(t) == 5);
  CHECK(mega_tmap_index(t, MegaOp::Qkv, 3) == 15);
  CHECK(mega_tmap_index(t, MegaOp::OProj, 3) == 16);
  CHECK(mega_tmap_index(t, MegaOp::GateUp, 3) == 17);
  CHECK(mega_tmap_index(t, MegaOp::Down, 3) == 18);  // its tail: 19
  CHECK(mega_tmap_index(t, MegaOp::LmHead, 0) == 110);
  CHECK(mega_tmap_count(t) == 111);
  // Every weight's map and tail map has its own index and none is left out, with tails
  // everywhere (k of 512 and 1,024: parts of 64 and 128 columns), nowhere, and mixed.
  for (const std::array<int, 3>& hqi :
       std::vector<std::array<int, 3>>{{512, 512, 1024}, {2048, 2048, 4096}, {2048, 1024, 5632}}) {
    MegaDims d = t;
    d.layers = 3;
    d.hidden = hqi[0];
    d.head_dim = 64;
    d.heads = hqi[1] / 64;
    d.intermediate = hqi[2];
    CAPTURE(hqi[0]);
    CAPTURE(hqi[1]);
    CAPTURE(hqi[2]);
    std::vector<int> seen(size_t(mega_tmap_count(d)), 0);
    auto mark = [&](MegaOp op, int layer, int k) {
      const int i = mega_tmap_index(d, op, layer);
      for (int j = i; j <= i + int(mega_mma_tail(k)); j++)
        if (j >= 0 && j < int(seen.size())) seen[size_t(j)]++;
    };
    for (int l = 0; l < d.layers; l++) {
      mark(MegaOp::Qkv, l, d.hidden);
      mark(MegaOp::OProj, l, d.q_dim());
      mark(MegaOp::GateUp, l, d.hidden);
      mark(MegaOp::Down, l, d.intermediate);
    }
    mark(MegaOp::LmHead, 0, d.hidden);
    CHECK(std::count(seen.begin(), seen.end(), 1) == int(seen.size()));
  }
}

// The GEMV loops' divisors (1-64) and attention's KV block sizes (MegaArgs::block_div).
TEST_CASE("mega schedule: FastDiv divides exactly where x · d < 2^32") {
  std::vector<uint32_t> divisors;
  for (uint32_t d = 1; d <= 64; d++) divisors.push_back(d);
  for (uint32_t d : {96u, 128u, 256u, 512u, 1024u}) divisors.push_back(d);
  for (uint32_t d : divisors) {
    FastDiv f;
    f.set(d);
    CAPTURE(d);
    int wrong = 0;
    for (uint32_t x = 0; x < (1u << 20); x++) wrong += f.div(x) != x / d;
    // and at the bound's edge
    const uint32_t top = uint32_t((uint64_t(1) << 32) / d) - 1;
    for (uint32_t x = top - 4096;; x++) {
      wrong += f.div(x) != x / d;
      if (x == top) break;
    }
    CHECK(wrong == 0);
  }
}

// Attention's P in bf16 over its fp32 scores (attention_mma.cuh): a row's K keys take 2K distinct
// bytes among its K fp32 scores' 4K (at K = 32 the swizzle moves half the heads' P to bytes
// 64-127); the 8 heads of an ldmatrix (rows 1 KB apart) read 8 distinct bank groups at every key
// group; and the softmax's warp, whose lane l reads score i = l + 32 j in pass j and then writes
// P[h, i], never writes bytes of a score that a later pass still reads.
TEST_CASE(
    "mega schedule: attention's bf16 P over the scores, in place and without bank conflicts") {
  for (int K = kMegaMinPartitionKeys; K <= kMegaPartitionKeys; K *= 2)
    for (int h = 0; h < 16; h++) {
      CAPTURE(K);
      CAPTURE(h);
      std::vector<int> seen(size_t(4 * K), 0);
      int late = 0;
      for (int i = 0; i < K; i++) {
        const uint32_t b = mega_p_granule(h, i);
        REQUIRE(b + 2 <= uint32_t(4 * K));
        seen[b]++, seen[b + 1]++;
        // Written in pass j = i / 32 over fp32 scores b / 4, (b + 1) / 4: read in passes ≤ j.
        late += int(b + 1) / 4 / 32 > i / 32;
      }
      CHECK(std::count(seen.begin(), seen.end(), 1) == 2 * K);
      CHECK(std::count(seen.begin(), seen.end(), 0) == 2 * K);
      CHECK(late == 0);
    }
  for (int key = 0; key < kMegaPartitionKeys; key += 8) {
    std::array<int, 8> groups{};
    for (int h = 0; h < 8; h++) groups[size_t((mega_p_granule(h, key) >> 4) & 7)]++;
    CAPTURE(key);
    CHECK(std::count(groups.begin(), groups.end(), 1) == 8);
  }
}

// Attention's partition size: the smallest power of two in [min_keys, 256] that the splits
// cover, so no split walks partitions below 256 keys, and past 256 · splits keys every split
// walks 256-key ones (the host sizes the partials for ceil(n / 256) beside the splits).
TEST_CASE("mega schedule: attention's partitions, 256 keys once a split walks") {
  CHECK(mega_partition_keys(601, 32, 64) == 64);  // Terra at batch 1: 10 splits busy
  CHECK(mega_partition_keys(7001, 32, 64) == 256);
  CHECK(mega_partition_keys(601, 4, 64) == 256);   // batch 8: 3 partitions, one a split
  CHECK(mega_partition_keys(1025, 4, 64) == 256);  // 5: split 0 walks two
  CHECK(mega_partition_keys(100, 4, 32) == 32);
  for (int splits : {1, 3, 4, 32})
    for (int min_keys : {32, 64, 256})
      for (int n = 1; n <= 9000; n += 7) {
        const int K = mega_partition_keys(n, splits, min_keys);
        const int parts = (n + K - 1) / K;
        CAPTURE(splits);
        CAPTURE(min_keys);
        CAPTURE(n);
        REQUIRE((K & (K - 1)) == 0);
        REQUIRE(K >= min_keys);
        REQUIRE(K <= kMegaPartitionKeys);
        REQUIRE(parts <= std::max(splits, (n + kMegaPartitionKeys - 1) / kMegaPartitionKeys));
        if (parts > splits) REQUIRE(K == kMegaPartitionKeys);
        if (K > min_keys) REQUIRE((K / 2) * splits < n);  // the smallest that covers
      }
}
