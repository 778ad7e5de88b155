// Tiny random models for any combination of ModelSpec features (issue 12 §1), shared by the
// CPU feature tests (tests/test_features.cpp) and the CUDA ones (tests/cuda/): a mapping table
// written from the spec's feature values, binding exactly the roles model/roles.h says they
// need (tensor "L{i}.<role>" per layer, "<role>" otherwise), a config.json and one
// model.safetensors of f32 values drawn from each tensor's name, so a tensor holds the same
// values in every combination that has it. Also: a pairwise covering set of feature values.
#pragma once

#include <array>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "model/mapping.h"
#include "model/roles.h"
#include "safetensors_fixture.h"

namespace loom::test {

constexpr int kFeatureVocab = 40;

inline nlohmann::json feature_json(const ModelSpec& s) {
  static const char* const kAct[] = {"silu", "gelu_tanh", "gelu", "relu"};
  static const char* const kPos[] = {"none", "absolute", "spatio_temporal"};
  static const char* const kProj[] = {"none", "linear", "mlp", "tokens"};
  nlohmann::json f = {{"norm", s.norm == NormKind::Rms ? "rms" : "layer"},
                      {"norm_affine", s.norm_affine},
                      {"norm_bias", s.norm_bias},
                      {"mlp", s.mlp == MlpKind::SwiGlu ? "swiglu" : "plain"},
                      {"activation", kAct[int(s.act)]},
                      {"qkv_bias", s.qkv_bias},
                      {"o_bias", s.o_bias},
                      {"mlp_bias", s.mlp_bias},
                      {"rotary", s.rotary},
                      {"learned_positions", kPos[int(s.positions)]},
                      {"action_projection", kProj[int(s.action_projection)]}};
  if (s.positions == PositionKind::Absolute) f["position_offset"] = s.position_offset;
  if (s.action_projection == ActionProjection::Mlp) f["action_mlp_layers"] = 2;
  return f;
}

inline std::string describe_features(const ModelSpec& s) {
  return feature_json(s).dump() + (s.tied_lm_head ? " tied" : "") +
         (s.logit_end ? " logit range" : "");
}

// Dimensions of a feature model. The defaults are the CPU suite's; the CUDA suite takes
// head_dim 16 (its attention kernels are built for head_dim 16, 64 and 128).
struct FeatureDims {
  int hidden = 8, heads = 2, head_dim = 4, intermediate = 12;
};

// Writes table.json, config.json and model.safetensors for the features of `f` into dir and
// loads them. Dimensions: `dims` (by default hidden 8, 2 heads of 4, MLP 12), 2 layers, 1 kv
// head, vocab 40; frame models P = 3 image slots, A = 2 action slots (ids 38, 39 when actions
// are tokens), T = 4.
inline LoadedModel load_feature_model(const std::string& dir, const ModelSpec& f,
                                      const FeatureDims& dims = {}) {
  const bool frames =
      f.positions == PositionKind::SpatioTemporal || f.action_projection != ActionProjection::None;
  const bool actions = f.action_projection != ActionProjection::None;
  const int P = 3, A = actions ? 2 : 0, T = 4;
  nlohmann::json config = {{"architectures", {"FeatureTestForCausalLM"}},
                           {"hidden", dims.hidden},
                           {"layers", 2},
                           {"heads", dims.heads},
                           {"kv_heads", 1},
                           {"head_dim", dims.head_dim},
                           {"intermediate", dims.intermediate},
                           {"vocab", kFeatureVocab},
                           {"rms_eps", 1e-5},
                           {"rope_theta", double(f.rope_theta)},
                           {"max_positions", frames ? (P + A) * T : 16},
                           {"tied_lm_head", f.tied_lm_head},
                           {"logit_begin", f.logit_begin},
                           {"logit_end", f.logit_end}};
  nlohmann::json cfg_map = nlohmann::json::object();
  for (const auto& [k, v] : config.items())
    if (k != "architectures") cfg_map[k] = k;
  if (frames) {
    config["image_tokens"] = P;
    config["action_tokens"] = A;
    config["temporal_rows"] = T;
    config["spatial_rows"] = P + A;
    for (const char* k : {"image_tokens", "action_tokens", "temporal_rows", "spatial_rows"})
      cfg_map[k] = k;
    if (f.action_projection == ActionProjection::Linear ||
        f.action_projection == ActionProjection::Mlp) {
      config["action_dim"] = 3;
      cfg_map["action_dim"] = "action_dim";
    }
  }
  nlohmann::json table = {{"architectures", {"FeatureTestForCausalLM"}},
                          {"config", cfg_map},
                          {"features", feature_json(f)},
                          {"weights", nlohmann::json::array()}};
  // The spec the config will produce, for the roles and shapes to write.
  const std::string table_path = dir + "/table.json";
  const std::string config_path = dir + "/config.json";
  ModelSpec spec = f;
  spec.hidden = dims.hidden, spec.layers = 2, spec.heads = dims.heads, spec.kv_heads = 1;
  spec.head_dim = dims.head_dim, spec.intermediate = dims.intermediate, spec.vocab = kFeatureVocab;
  spec.max_positions = config["max_positions"];
  spec.action_mlp_layers = f.action_projection == ActionProjection::Mlp ? 2 : 0;
  if (frames) spec.image_tokens = P, spec.action_tokens = A, spec.temporal_rows = T;
  if (frames) spec.spatial_rows = P + A;
  if (config.contains("action_dim")) spec.action_dim = 3;
  std::vector<fixture::FixtureTensor> tensors;
  for (const std::string& role : needed_roles(spec)) {
    int j = 0;
    const RoleDef* d = find_role(role, &j);
    const std::string name = d->per_layer ? "L{i}." + role : role;
    const std::vector<int64_t> shape = d->shape(spec, j);
    nlohmann::json rule = {{"role", role}, {"name", name}, {"shape", shape}};
    if (role == "lm_head") rule["tied_to"] = "embed", rule["tied_when"] = "tied_lm_head";
    table["weights"].push_back(rule);
    int64_t n = 1;
    for (int64_t x : shape) n *= x;
    const bool is_norm =
        role.find("norm") != std::string::npos && role.find("bias") == std::string::npos;
    for (int l = 0; l < (d->per_layer ? spec.layers : 1); l++) {
      const std::string tn = d->per_layer ? "L" + std::to_string(l) + "." + role : role;
      std::mt19937 rng(uint32_t(std::hash<std::string>()(tn)));
      std::normal_distribution<float> normal(0.0f, 1.0f);
      std::vector<float> v(static_cast<size_t>(n));
      for (float& x : v) x = is_norm ? 1.0f + 0.2f * normal(rng) : 0.5f * normal(rng);
      tensors.push_back(fixture::make_tensor(tn, DType::F32, shape, v));
    }
  }
  fixture::write_file(table_path, table.dump(1));
  fixture::write_file(config_path, config.dump(1));
  fixture::write_safetensors(dir + "/model.safetensors", tensors);
  LoadOptions opt;
  opt.table_path = table_path;
  return load_model(dir, opt);
}

// One prefill step of one sequence; returns the last slot's logits and (token) its greedy draw.
// Frame models: frame 0's P image tokens and A action slots, then one image token of frame 1.
inline std::vector<float> run_feature_step(Backend& b, const ModelSpec& s, int32_t* token) {
  CacheRequest cr;
  cr.block_size = 16;
  cr.num_blocks = 4;
  b.allocate_cache(cr);
  StepBatch batch;
  const int adim = std::max(s.action_dim, 1);
  auto add = [&](int32_t tok, float action) {
    batch.positions.push_back(int32_t(batch.tokens.size()));
    batch.tokens.push_back(tok);
    for (int d = 0; d < adim; d++) batch.actions.push_back(action * float(d + 1));
  };
  if (s.has_frames()) {
    for (int t = 0; t < s.image_tokens; t++) add(5 + 7 * t, 0.0f);
    for (int a = 0; a < s.action_tokens; a++)
      if (s.action_projection == ActionProjection::Tokens)
        add(kFeatureVocab - s.action_tokens + a, 0.0f);
      else
        add(kActionSlot, 0.3f + 0.4f * float(a));
    add(11, 0.0f);
  } else {
    for (int32_t t : {3, 17, 29, 8, 1, 22}) add(t, 0.0f);
  }
  if (s.action_dim == 0) batch.actions.clear();
  batch.slot_start = {0, int32_t(batch.tokens.size())};
  batch.kv_len = {0};
  batch.block_tables = {0, 1};
  batch.blocks_per_seq = 2;
  batch.sample = {1};
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  batch.sampling = {greedy};
  batch.sample_index = {0};
  batch.draw_index = {0};
  batch.want_logits = true;
  StepOutput out;
  b.step(batch, out);
  if (token) *token = out.tokens.at(0);
  return out.logits;
}

// ------------------------------------------------------------------ pairwise covering set

// Factor k of a combination: its value index, and how many values it has.
constexpr int kFactors = 13;
inline const int* factor_sizes() {
  // norm, norm_affine, norm_bias, mlp, act, qkv_bias, o_bias, mlp_bias, rotary, positions,
  // action, tied head, logit range
  static const int sizes[kFactors] = {2, 2, 2, 2, 4, 2, 2, 2, 2, 3, 4, 2, 2};
  return sizes;
}

inline ModelSpec spec_of(const std::vector<int>& v) {
  ModelSpec s;
  s.norm = NormKind(v[0]);
  s.norm_affine = v[1] == 0;
  s.norm_bias = v[2] == 1;
  s.mlp = MlpKind(v[3]);
  s.act = Activation(v[4]);
  s.qkv_bias = v[5], s.o_bias = v[6], s.mlp_bias = v[7];
  s.rotary = v[8] == 0;
  s.positions = PositionKind(v[9]);
  if (s.positions == PositionKind::Absolute) s.position_offset = 2;
  s.action_projection = ActionProjection(v[10]);
  s.tied_lm_head = v[11];
  if (v[12]) s.logit_begin = 0, s.logit_end = kFeatureVocab - 8;
  return s;
}

// The schema's one constraint between features: norm_bias needs norm "layer" with affine.
inline bool accepted(const std::vector<int>& v) {
  return !(v[2] == 1 && (v[0] == 0 || v[1] == 1));
}

inline std::vector<int> values_of(const ModelSpec& s) {
  return {int(s.norm),
          s.norm_affine ? 0 : 1,
          s.norm_bias,
          int(s.mlp),
          int(s.act),
          s.qkv_bias,
          s.o_bias,
          s.mlp_bias,
          s.rotary ? 0 : 1,
          int(s.positions),
          int(s.action_projection),
          s.tied_lm_head,
          s.logit_end ? 1 : 0};
}

using Pair = std::array<int, 4>;  // factor a, value, factor b, value (a < b)

inline std::set<Pair> pairs_of(const std::vector<int>& v) {
  std::set<Pair> out;
  for (int a = 0; a < kFactors; a++)
    for (int b = a + 1; b < kFactors; b++) out.insert({a, v[size_t(a)], b, v[size_t(b)]});
  return out;
}

// Pairs some accepted combination holds.
inline std::set<Pair> accepted_pairs() {
  std::set<Pair> out;
  const int* n = factor_sizes();
  for (int a = 0; a < kFactors; a++)
    for (int b = a + 1; b < kFactors; b++)
      for (int x = 0; x < n[a]; x++)
        for (int y = 0; y < n[b]; y++) {
          std::vector<int> v(kFactors, 0);
          v[size_t(a)] = x, v[size_t(b)] = y;
          // Complete with values that satisfy the constraint where possible.
          if (a != 0 && b != 0 && v[2] == 1) v[0] = 1;
          if (a != 1 && b != 1 && v[2] == 1) v[1] = 0;
          if (accepted(v)) out.insert({a, x, b, y});
        }
  return out;
}

inline std::set<Pair> feature_pairs(const std::vector<ModelSpec>& rows) {
  std::set<Pair> out;
  for (const ModelSpec& s : rows)
    for (const Pair& p : pairs_of(values_of(s))) out.insert(p);
  return out;
}

// Greedy AETG-style: each row is the best of 200 seeded random accepted candidates by new
// pairs covered; deterministic for a given seed.
inline std::vector<ModelSpec> covering_set() {
  const std::set<Pair> want = accepted_pairs();
  std::set<Pair> have;
  std::vector<ModelSpec> rows;
  std::mt19937 rng(12);
  const int* n = factor_sizes();
  while (have.size() < want.size() && rows.size() < 60) {
    std::vector<int> best;
    size_t best_new = 0;
    for (int c = 0; c < 200; c++) {
      std::vector<int> v(kFactors);
      for (int k = 0; k < kFactors; k++) v[size_t(k)] = int(rng() % uint32_t(n[k]));
      if (!accepted(v)) continue;
      size_t fresh = 0;
      for (const Pair& p : pairs_of(v)) fresh += have.count(p) == 0;
      if (fresh > best_new) best_new = fresh, best = v;
    }
    if (best.empty()) continue;
    for (const Pair& p : pairs_of(best)) have.insert(p);
    rows.push_back(spec_of(best));
  }
  return rows;
}

}  // namespace loom::test
