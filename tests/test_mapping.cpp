// Mapping tables and load_model: spec fields from config.json, merged qkv / gate_up contents,
// ties, the exact mismatch / missing / unknown-architecture messages, unused-tensor warnings,
// the rope_permute transform, table validation, and `loom inspect` text (OPT and GPT-2:
// test_mapping_families.cpp). Tiny checkpoints are written in temp dirs; testdata/tiny_* are
// loaded too when present.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <algorithm>
#include <functional>

#include "model/inspect.h"
#include "model/mapping.h"
#include "model_copy.h"
#include "safetensors_fixture.h"

using namespace loom;
using namespace loom::fixture;

namespace {

const std::string kTables = std::string(LOOM_SOURCE_DIR) + "/models";

bool contains(const std::vector<std::string>& v, const std::string& needle) {
  for (const auto& s : v)
    if (s.find(needle) != std::string::npos) return true;
  return false;
}

enum class Variant { V1, V2, Llama };

struct Dims {
  int hidden = 8, layers = 2, heads = 2, kv_heads = 1, intermediate = 12, vocab = 20;
  int image = 3, action = 2, temporal = 4, action_dim = 3;
  int head_dim() const { return hidden / heads; }
};

nlohmann::json tiny_config(Variant v, const Dims& d) {
  nlohmann::json c = {
      {"architectures",
       {v == Variant::V1   ? "LlamaActionForCausalLM"
        : v == Variant::V2 ? "LlamaActionV2ForCausalLM"
                           : "LlamaForCausalLM"}},
      {"hidden_size", d.hidden},
      {"num_hidden_layers", d.layers},
      {"num_attention_heads", d.heads},
      {"num_key_value_heads", d.kv_heads},
      {"intermediate_size", d.intermediate},
      {"vocab_size", d.vocab},
      {"rms_norm_eps", 1e-5},
      {"max_position_embeddings", (d.image + d.action) * d.temporal},
      {"bos_token_id", d.vocab - 1},
      {"eos_token_id", d.vocab - 1},
      {"hidden_act", "silu"},
      {"rope_scaling", nullptr},
      {"tie_word_embeddings", false},
  };
  if (v != Variant::Llama) {
    c["num_image_patches"] = d.image;
    c["num_action_tokens"] = d.action;
    c["action_dim"] = d.action_dim;
    c["num_spatio_embeddings"] = d.image + d.action;
    c["num_temporal_embeddings"] = d.temporal;
    c["activation_function"] = "relu";  // OPT leftover Terra carries; unused
  }
  return c;
}

// Every tensor of the variant with its HF name; values differ per tensor (bf16-exact).
// Tensors over 1M elements are zeros, to keep the big-shape test fast.
std::vector<FixtureTensor> tiny_tensors(Variant v, DType dt, const Dims& d) {
  std::vector<FixtureTensor> out;
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    out.push_back(make_tensor(
        name, dt, shape,
        n > (1 << 20) ? std::vector<float>(size_t(n), 0.0f) : pattern(n, int(out.size()) + 1)));
  };
  const int64_t h = d.hidden, q = int64_t(d.heads) * d.head_dim(),
                kv = int64_t(d.kv_heads) * d.head_dim();
  add("model.embed_tokens.weight", {d.vocab, h});
  for (int i = 0; i < d.layers; i++) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    add(p + "input_layernorm.weight", {h});
    add(p + "self_attn.q_proj.weight", {q, h});
    add(p + "self_attn.k_proj.weight", {kv, h});
    add(p + "self_attn.v_proj.weight", {kv, h});
    add(p + "self_attn.o_proj.weight", {h, q});
    add(p + "post_attention_layernorm.weight", {h});
    add(p + "mlp.gate_proj.weight", {d.intermediate, h});
    add(p + "mlp.up_proj.weight", {d.intermediate, h});
    add(p + "mlp.down_proj.weight", {h, d.intermediate});
  }
  add("model.norm.weight", {h});
  add("lm_head.weight", {d.vocab, h});
  if (v != Variant::Llama) {
    add("pos_embedding_spatio_temporal.spatio_embeddings.weight", {d.image + d.action, h});
    add("pos_embedding_spatio_temporal.temporal_embeddings.weight", {d.temporal, h});
  }
  if (v == Variant::V1) {
    add("action_projection.weight", {h, d.action_dim});
    add("action_projection.bias", {h});
  } else if (v == Variant::V2) {
    for (int j : {0, 2, 4}) {
      add("action_projection." + std::to_string(j) + ".weight", {h, j == 0 ? d.action_dim : h});
      add("action_projection." + std::to_string(j) + ".bias", {h});
    }
  }
  return out;
}

FixtureTensor& named(std::vector<FixtureTensor>& ts, const std::string& name) {
  for (auto& t : ts)
    if (t.name == name) return t;
  fail("test: no fixture tensor ", name);
}

void drop(std::vector<FixtureTensor>& ts, const std::string& name) {
  for (size_t i = 0; i < ts.size(); i++)
    if (ts[i].name == name) {
      ts.erase(ts.begin() + long(i));
      return;
    }
  fail("test: no fixture tensor ", name);
}

std::vector<float> values(const FixtureTensor& t) {
  Tensor v;
  v.dtype = t.dtype;
  v.shape = t.shape;
  v.data = t.bytes.data();
  return v.to_f32();
}

// Writes config.json and the tensors, in one file or split over two shards with an index.
void write_model(const std::string& dir, const nlohmann::json& config,
                 const std::vector<FixtureTensor>& ts, int shards = 1) {
  write_file(dir + "/config.json", config.dump(2));
  if (shards == 1) {
    write_safetensors(dir + "/model.safetensors", ts);
    return;
  }
  const size_t half = ts.size() / 2;
  const std::vector<FixtureTensor> a(ts.begin(), ts.begin() + long(half)),
      b(ts.begin() + long(half), ts.end());
  const std::string n1 = "model-00001-of-00002.safetensors",
                    n2 = "model-00002-of-00002.safetensors";
  write_safetensors(dir + "/" + n1, a);
  write_safetensors(dir + "/" + n2, b);
  nlohmann::json wm = nlohmann::json::object();
  for (const auto& t : a) wm[t.name] = n1;
  for (const auto& t : b) wm[t.name] = n2;
  write_file(dir + "/model.safetensors.index.json",
             nlohmann::json{{"metadata", {{"total_size", 0}}}, {"weight_map", wm}}.dump(2));
}

LoadedModel load(const std::string& dir) {
  LoadOptions o;
  o.tables_dir = kTables;
  return load_model(dir, o);
}

// Rows [r0, r1) of a 2-D tensor as floats.
std::vector<float> rows(const Tensor& t, int64_t r0, int64_t r1) {
  const std::vector<float> all = t.to_f32();
  const int64_t cols = t.shape[1];
  return std::vector<float>(all.begin() + r0 * cols, all.begin() + r1 * cols);
}

int64_t total_numel(const std::vector<FixtureTensor>& ts) {
  int64_t n = 0;
  for (const auto& t : ts) {
    int64_t k = 1;
    for (int64_t s : t.shape) k *= s;
    n += k;
  }
  return n;
}

}  // namespace

TEST_SUITE("mapping") {
  TEST_CASE("expressions: products, sums, parentheses, exact division") {
    const std::map<std::string, int64_t> vars = {{"hidden", 2048},      {"heads", 32},
                                                 {"kv_heads", 4},       {"head_dim", 64},
                                                 {"image_tokens", 576}, {"action_tokens", 6}};
    CHECK(eval_expr("kv_heads*head_dim", vars) == 256);
    CHECK(eval_expr("hidden/heads", vars) == 64);
    CHECK(eval_expr("image_tokens + action_tokens", vars) == 582);
    CHECK(eval_expr("2*(heads+kv_heads)-1", vars) == 71);
    CHECK(eval_expr(" 7 ", vars) == 7);
    CHECK_ERROR(eval_expr("hidden/3", vars), "expression \"hidden/3\": 2048 is not divisible by 3");
    CHECK_ERROR(eval_expr("foo*2", vars), "expression \"foo*2\": unknown name \"foo\"");
    CHECK_ERROR(eval_expr("hidden hidden", vars), "unexpected 'h' at column 8");
    CHECK_ERROR(eval_expr("(hidden", vars), "missing ')'");
  }

  TEST_CASE("rope_permute: Meta interleaved rotary rows → HF half-split rows, per head") {
    // 2 heads of head_dim 6, one byte per row holding its Meta row index.
    std::vector<uint8_t> src(12), dst(12, 0xff);
    for (int i = 0; i < 12; i++) src[size_t(i)] = uint8_t(i);
    rope_permute_rows(src.data(), dst.data(), 12, 1, 6);
    CHECK(dst == std::vector<uint8_t>{0, 2, 4, 1, 3, 5, 6, 8, 10, 7, 9, 11});
    // Rows of several bytes move whole.
    std::vector<uint8_t> s2 = {10, 11, 20, 21, 30, 31, 40, 41}, d2(8);
    rope_permute_rows(s2.data(), d2.data(), 4, 2, 4);
    CHECK(d2 == std::vector<uint8_t>{10, 11, 30, 31, 20, 21, 40, 41});
    CHECK_ERROR(rope_permute_rows(src.data(), dst.data(), 12, 1, 5), "even head_dim 5");
  }

  TEST_CASE("Terra v1, bf16, two shards: spec, merged qkv and gate_up, views") {
    TempDir tmp;
    Dims d;
    auto ts = tiny_tensors(Variant::V1, DType::BF16, d);
    write_model(tmp.path, tiny_config(Variant::V1, d), ts, 2);
    const LoadedModel m = load(tmp.path);
    const ModelSpec& s = m.spec;
    CHECK(s.architecture == "LlamaActionForCausalLM");
    CHECK(s.table == "llama_action.json");
    CHECK(m.table_path == kTables + "/llama_action.json");
    CHECK(m.dtype == DType::BF16);
    CHECK(s.hidden == 8);
    CHECK(s.layers == 2);
    CHECK(s.heads == 2);
    CHECK(s.kv_heads == 1);
    CHECK(s.head_dim == 4);  // default hidden/heads
    CHECK(s.intermediate == 12);
    CHECK(s.vocab == 20);
    CHECK(s.rms_eps == doctest::Approx(1e-5));
    CHECK(s.rope_theta == 10000.0f);  // default: the key is absent
    CHECK(s.max_positions == 20);
    CHECK_FALSE(s.tied_lm_head);
    CHECK(s.bos_id == 19);
    CHECK(s.eos_id == 19);
    CHECK(s.image_tokens == 3);
    CHECK(s.action_tokens == 2);
    CHECK(s.action_dim == 3);
    CHECK(s.spatial_rows == 5);
    CHECK(s.temporal_rows == 4);
    CHECK(s.action_projection == ActionProjection::Linear);
    CHECK(s.action_mlp_layers == 0);

    const Weights& w = m.weights;
    REQUIRE(w.layers.size() == 2);
    const Tensor& qkv = w.layers[1].qkv;
    CHECK(qkv.shape == std::vector<int64_t>{16, 8});  // q 8 rows, k 4, v 4
    CHECK(qkv.dtype == DType::BF16);
    CHECK(rows(qkv, 0, 8) == values(named(ts, "model.layers.1.self_attn.q_proj.weight")));
    CHECK(rows(qkv, 8, 12) == values(named(ts, "model.layers.1.self_attn.k_proj.weight")));
    CHECK(rows(qkv, 12, 16) == values(named(ts, "model.layers.1.self_attn.v_proj.weight")));
    const Tensor& gu = w.layers[0].gate_up;
    CHECK(gu.shape == std::vector<int64_t>{24, 8});
    CHECK(rows(gu, 0, 12) == values(named(ts, "model.layers.0.mlp.gate_proj.weight")));
    CHECK(rows(gu, 12, 24) == values(named(ts, "model.layers.0.mlp.up_proj.weight")));
    CHECK(w.layers[1].down.to_f32() == values(named(ts, "model.layers.1.mlp.down_proj.weight")));
    CHECK(w.layers[0].attn_norm.to_f32() ==
          values(named(ts, "model.layers.0.input_layernorm.weight")));
    CHECK(w.layers[0].mlp_norm.to_f32() ==
          values(named(ts, "model.layers.0.post_attention_layernorm.weight")));
    CHECK(w.final_norm.to_f32() == values(named(ts, "model.norm.weight")));
    CHECK(w.lm_head.to_f32() == values(named(ts, "lm_head.weight")));
    CHECK(w.pos_spatial.shape == std::vector<int64_t>{5, 8});
    CHECK(w.pos_temporal.to_f32() ==
          values(named(ts, "pos_embedding_spatio_temporal.temporal_embeddings.weight")));
    REQUIRE(w.action.size() == 1);
    CHECK(w.action[0].weight.shape == std::vector<int64_t>{8, 3});
    CHECK(w.action[0].bias.to_f32() == values(named(ts, "action_projection.bias")));

    // Unmerged roles are zero-copy views of the mmapped shard.
    CHECK(w.embed.data == m.checkpoint->tensor("model.embed_tokens.weight").data);
    CHECK(w.layers[0].o.data ==
          m.checkpoint->tensor("model.layers.0.self_attn.o_proj.weight").data);
    CHECK(w.lm_head.data != w.embed.data);

    CHECK(m.parameters == total_numel(ts));
    CHECK(m.bytes == size_t(total_numel(ts)) * 2);
    CHECK(m.step_bytes == m.bytes - size_t(20 * 8 * 2));
    CHECK(m.warnings.empty());
    // bindings: 7 single roles + 6 layer roles × 2 layers
    CHECK(m.bindings.size() == 7 + 12);
    bool saw = false;
    for (const Binding& b : m.bindings)
      if (b.role == "layer.qkv" && b.layer == 1) {
        saw = true;
        CHECK(b.hf_names == std::vector<std::string>{"model.layers.1.self_attn.q_proj.weight",
                                                     "model.layers.1.self_attn.k_proj.weight",
                                                     "model.layers.1.self_attn.v_proj.weight"});
        CHECK(b.templates[1] == "model.layers.{i}.self_attn.k_proj.weight");
        CHECK(b.bytes == 16 * 8 * 2);
      }
    CHECK(saw);

    const std::string text = describe_model(m);
    INFO(text);
    CHECK(text.find("architecture  LlamaActionForCausalLM") != std::string::npos);
    CHECK(text.find("2 shards") != std::string::npos);
    CHECK(text.find("layer.qkv         ×2     [16, 8]          bf16   "
                    "model.layers.{i}.self_attn.q_proj.weight + "
                    "model.layers.{i}.self_attn.k_proj.weight") != std::string::npos);
    CHECK(text.find("action_projection linear") != std::string::npos);
    CHECK(text.find("parameters             " + group_thousands(total_numel(ts))) !=
          std::string::npos);
  }

  TEST_CASE("Terra V2, f32: three-layer action MLP from action_projection.{0,2,4}") {
    TempDir tmp;
    Dims d;
    auto ts = tiny_tensors(Variant::V2, DType::F32, d);
    write_model(tmp.path, tiny_config(Variant::V2, d), ts);
    const LoadedModel m = load(tmp.path);
    CHECK(m.spec.architecture == "LlamaActionV2ForCausalLM");
    CHECK(m.dtype == DType::F32);
    CHECK(m.spec.action_projection == ActionProjection::Mlp);
    CHECK(m.spec.action_mlp_layers == 3);
    REQUIRE(m.weights.action.size() == 3);
    CHECK(m.weights.action[0].weight.shape == std::vector<int64_t>{8, 3});
    CHECK(m.weights.action[1].weight.shape == std::vector<int64_t>{8, 8});
    CHECK(m.weights.action[1].weight.to_f32() == values(named(ts, "action_projection.2.weight")));
    CHECK(m.weights.action[2].bias.to_f32() == values(named(ts, "action_projection.4.bias")));
    CHECK(m.bytes == size_t(total_numel(ts)) * 4);
    const std::string text = describe_model(m);
    CHECK(text.find("mlp (3 layers, ReLU between)") != std::string::npos);
  }

  TEST_CASE("plain Llama, f16: tied lm_head is a view of embed") {
    TempDir tmp;
    Dims d;
    auto ts = tiny_tensors(Variant::Llama, DType::F16, d);
    auto cfg = tiny_config(Variant::Llama, d);

    SUBCASE("tie_word_embeddings true, no lm_head.weight") {
      drop(ts, "lm_head.weight");
      cfg["tie_word_embeddings"] = true;
      write_model(tmp.path, cfg, ts);
      const LoadedModel m = load(tmp.path);
      CHECK(m.spec.tied_lm_head);
      CHECK_FALSE(m.spec.has_frames());
      CHECK(m.spec.action_projection == ActionProjection::None);
      CHECK(m.weights.action.empty());
      CHECK(m.weights.pos_spatial.empty());
      CHECK(m.weights.lm_head.data == m.weights.embed.data);
      CHECK(m.weights.lm_head.shape == std::vector<int64_t>{20, 8});
      CHECK(m.dtype == DType::F16);
      CHECK(m.parameters == total_numel(ts));  // embed counted once
      CHECK(m.step_bytes == m.bytes);          // lm_head streams the embed table
      CHECK(contains(m.notes, "lm_head tied to embed (tied_lm_head)"));  // asked for: no warning
      CHECK_FALSE(contains(m.warnings, "tied"));
      CHECK(describe_model(m).find("= embed (tied)") != std::string::npos);
    }
    SUBCASE("tied, with weights of two dtypes: bound again as f32, the tie said once") {
      drop(ts, "lm_head.weight");
      cfg["tie_word_embeddings"] = true;
      auto& n = named(ts, "model.norm.weight");
      n = make_tensor(n.name, DType::F32, n.shape, pattern(int(n.shape[0]), 3));
      write_model(tmp.path, cfg, ts);
      const LoadedModel m = load(tmp.path);
      CHECK(m.dtype == DType::F32);
      CHECK(std::count(m.notes.begin(), m.notes.end(), "lm_head tied to embed (tied_lm_head)") ==
            1);
    }
    SUBCASE("no tie_word_embeddings and no lm_head.weight: the table's fallback ties it") {
      drop(ts, "lm_head.weight");
      cfg.erase("tie_word_embeddings");
      write_model(tmp.path, cfg, ts);
      const LoadedModel m = load(tmp.path);
      CHECK(m.spec.tied_lm_head);
      CHECK(m.weights.lm_head.data == m.weights.embed.data);
      CHECK(contains(m.warnings, "lm_head tied to embed: lm_head.weight is absent"));
    }
    SUBCASE("untied in config but lm_head.weight absent: a missing tensor, not a tie") {
      drop(ts, "lm_head.weight");
      write_model(tmp.path, cfg, ts);  // "tie_word_embeddings": false
      CHECK_ERROR(load(tmp.path), "missing tensor lm_head.weight (role lm_head) in " + tmp.path +
                                      ": " + tmp.path +
                                      "/config.json says \"tie_word_embeddings\": false, so "
                                      "it is not tied to embed");
    }
    SUBCASE("tied but lm_head.weight present: ignored, said once") {
      cfg["tie_word_embeddings"] = true;
      write_model(tmp.path, cfg, ts);
      const LoadedModel m = load(tmp.path);
      CHECK(m.weights.lm_head.data == m.weights.embed.data);
      CHECK(contains(m.warnings, "lm_head.weight ignored: tied_lm_head ties lm_head to embed"));
      CHECK_FALSE(contains(m.warnings, "unused"));
    }
  }

  // HF generate stops at generation_config.json's eos_token_id (Llama 3 Instruct lists its
  // end-of-turn id only there): loom's end ids are config.json's and those.
  TEST_CASE("generation_config.json's eos_token_id ends generation too") {
    TempDir tmp;
    Dims d;
    write_model(tmp.path, tiny_config(Variant::Llama, d),
                tiny_tensors(Variant::Llama, DType::F32, d));
    std::ofstream(tmp.path + "/generation_config.json") << R"({"eos_token_id": [19, 7, 7, 3]})";
    const LoadedModel m = load(tmp.path);
    CHECK(m.spec.eos_id == 19);  // config.json's
    CHECK(m.spec.more_eos == std::vector<int>{7, 3});
    CHECK(m.spec.is_eos(3));
    std::ofstream(tmp.path + "/generation_config.json") << R"({"eos_token_id": 20})";
    CHECK_ERROR(load(tmp.path), tmp.path +
                                    "/generation_config.json: \"eos_token_id\" is 20; "
                                    "expected ids in [0, 20)");
  }

  TEST_CASE("the exact shape mismatch message") {
    TempDir tmp;
    Dims d;
    d.hidden = 2048, d.heads = 32, d.kv_heads = 4, d.layers = 4, d.intermediate = 16, d.vocab = 4;
    auto ts = tiny_tensors(Variant::V1, DType::BF16, d);
    auto& k = named(ts, "model.layers.3.self_attn.k_proj.weight");
    k = make_tensor(k.name, DType::BF16, {2048, 2048}, std::vector<float>(2048 * 2048, 0.0f));
    write_model(tmp.path, tiny_config(Variant::V1, d), ts);
    CHECK_ERROR(load(tmp.path), tmp.path +
                                    "/model.safetensors: expected [256, 2048] bf16, found "
                                    "[2048, 2048] bf16 for "
                                    "model.layers.3.self_attn.k_proj.weight");
  }

  TEST_CASE("dtype mismatch, missing tensor, unused tensors") {
    TempDir tmp;
    Dims d;
    d.layers = 4;
    auto ts = tiny_tensors(Variant::V1, DType::BF16, d);
    auto cfg = tiny_config(Variant::V1, d);

    SUBCASE("one f32 tensor among bf16: every weight read as f32, each exactly, and said") {
      // (As the first weight's dtype, bf16, the f32 norm lost its low bits: other tokens than
      // HF's, which computes in f32 on the stored values.)
      auto& n = named(ts, "model.layers.1.input_layernorm.weight");
      std::vector<float> values = pattern(8, 3);
      values[0] = 1.0f + 1.0f / 512;  // between two bf16 values: bf16 would round it to 1.0
      n = make_tensor(n.name, DType::F32, {8}, values);
      write_model(tmp.path, cfg, ts);
      const LoadedModel m = load(tmp.path);
      CHECK(m.dtype == DType::F32);
      const Tensor& w = m.weights.layers[1].attn_norm;
      CHECK(w.dtype == DType::F32);
      CHECK(w.to_f32()[0] == values[0]);
      CHECK(m.weights.layers[1].qkv.dtype == DType::F32);  // bf16 in the file (exact in f32)
      CHECK(contains(m.warnings,
                     "stored as bf16 converted to f32: the checkpoint mixes weight "
                     "dtypes, so every weight is read as f32, each exactly"));
    }
    SUBCASE("a wrong shape is still an error, whatever the dtype") {
      auto& n = named(ts, "model.layers.1.input_layernorm.weight");
      n = make_tensor(n.name, DType::F32, {4}, pattern(4, 3));
      write_model(tmp.path, cfg, ts);
      CHECK_ERROR(load(tmp.path),
                  "expected [8] bf16, found [4] f32 for model.layers.1.input_layernorm.weight");
    }
    SUBCASE("integer weights") {
      ts[0].dtype = DType::I32;  // embed [20, 8] bf16 bytes read as [20, 4] i32
      ts[0].shape = {20, 4};
      write_model(tmp.path, cfg, ts);
      CHECK_ERROR(load(tmp.path),
                  "model.embed_tokens.weight is i32; weights must be bf16, f16 or f32");
    }
    SUBCASE("missing required tensor") {
      drop(ts, "model.layers.3.mlp.up_proj.weight");
      write_model(tmp.path, cfg, ts, 2);
      CHECK_ERROR(load(tmp.path),
                  "missing tensor model.layers.3.mlp.up_proj.weight (role "
                  "layer.gate_up, layer 3) in " +
                      tmp.path);
    }
    SUBCASE("missing untied lm_head (Terra's table has no fallback)") {
      drop(ts, "lm_head.weight");
      write_model(tmp.path, cfg, ts);
      CHECK_ERROR(load(tmp.path), "missing tensor lm_head.weight (role lm_head) in " + tmp.path);
    }
    SUBCASE("unused tensors: one warning each, never loaded") {
      ts.push_back(
          make_tensor("model.layers.0.self_attn.rotary_emb.inv_freq", DType::F32, {2}, {1, 0.5f}));
      ts.push_back(make_tensor("model.layers.4.input_layernorm.weight", DType::BF16, {8},
                               pattern(8, 9)));  // a layer beyond num_hidden_layers
      write_model(tmp.path, cfg, ts);
      const LoadedModel m = load(tmp.path);
      CHECK(m.warnings.size() == 2);
      CHECK(contains(m.warnings,
                     "unused checkpoint tensor "
                     "model.layers.0.self_attn.rotary_emb.inv_freq "
                     "(model.safetensors): no role in llama_action.json uses it"));
      CHECK(contains(m.warnings, "unused checkpoint tensor model.layers.4.input_layernorm.weight"));
      CHECK(m.parameters == total_numel(ts) - 2 - 8);
    }
  }

  TEST_CASE("unknown architecture names the config, the tables and the known ones") {
    TempDir tmp;
    Dims d;
    auto cfg = tiny_config(Variant::Llama, d);
    cfg["architectures"] = {"Foo"};
    write_model(tmp.path, cfg, tiny_tensors(Variant::Llama, DType::F32, d));
    CHECK_ERROR(load(tmp.path),
                "unknown architecture \"Foo\" in " + tmp.path + "/config.json: no table in " +
                    kTables +
                    " matches (known: GPT2LMHeadModel, GPT2Model, LlamaForCausalLM, "
                    "LlamaActionForCausalLM, LlamaActionTokensForCausalLM, "
                    "LlamaActionV2ForCausalLM, MetaLlamaForCausalLM, OPTForCausalLM); add "
                    "models/<name>.json or pass --model-table");
    // An explicit table is used as told, with a warning.
    LoadOptions o;
    o.table_path = kTables + "/llama.json";
    const LoadedModel m = load_model(tmp.path, o);
    CHECK(m.spec.architecture == "Foo");
    CHECK(m.spec.table == "llama.json");
    CHECK(contains(m.warnings, "architecture \"Foo\" is not listed in"));
  }

  TEST_CASE("the default search finds the tables without options") {
    TempDir tmp;
    Dims d;
    write_model(tmp.path, tiny_config(Variant::Llama, d),
                tiny_tensors(Variant::Llama, DType::F32, d));
    const LoadedModel m = load_model(tmp.path);
    CHECK(m.spec.table == "llama.json");
    CHECK_FALSE(table_search_dirs("").empty());
    CHECK(table_search_dirs("/x") == std::vector<std::string>{"/x"});
  }

  TEST_CASE("spec sanity and config checks") {
    TempDir tmp;
    Dims d;
    auto ts = tiny_tensors(Variant::V1, DType::F32, d);
    auto cfg = tiny_config(Variant::V1, d);
    const std::string cp = tmp.path + "/config.json";
    SUBCASE("heads not a multiple of kv_heads") {
      cfg["num_key_value_heads"] = 3;
      write_model(tmp.path, cfg, ts);
      CHECK_ERROR(load(tmp.path), cp + ": heads 2 is not a multiple of kv_heads 3");
    }
    SUBCASE("spatial rows ≠ P + A") {
      cfg["num_spatio_embeddings"] = 6;
      write_model(tmp.path, cfg, ts);
      CHECK_ERROR(load(tmp.path), cp + ": spatial_rows 6 must equal image_tokens 3 + "
                                       "action_tokens 2 = 5");
    }
    SUBCASE("missing required key") {
      cfg.erase("hidden_size");
      write_model(tmp.path, cfg, ts);
      CHECK_ERROR(load(tmp.path), cp +
                                      ": missing \"hidden_size\" (spec field hidden, required by " +
                                      kTables + "/llama_action.json)");
    }
    SUBCASE("hidden not divisible by heads and no head_dim") {
      cfg["num_attention_heads"] = 3;
      cfg["num_key_value_heads"] = 3;
      write_model(tmp.path, cfg, ts);
      CHECK_ERROR(load(tmp.path), cp + ": no \"head_dim\", and the default of head_dim fails: "
                                       "expression \"hidden/heads\": 8 is not divisible by 3");
    }
    SUBCASE("unsupported activation") {
      cfg["hidden_act"] = "gelu";
      write_model(tmp.path, cfg, ts);
      CHECK_ERROR(load(tmp.path), cp + ": \"hidden_act\" is \"gelu\"; " + kTables +
                                      "/llama_action.json supports only [\"silu\"]");
    }
    SUBCASE("rope scaling is refused, not ignored") {
      cfg["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
      write_model(tmp.path, cfg, ts);
      CHECK_ERROR(load(tmp.path),
                  cp + ": \"rope_scaling\" is {\"factor\":2.0,\"type\":\"linear\"}");
    }
    SUBCASE("wrong JSON type") {
      cfg["hidden_size"] = "eight";
      write_model(tmp.path, cfg, ts);
      CHECK_ERROR(load(tmp.path),
                  cp + ": \"hidden_size\" (spec field hidden) is \"eight\"; expected an integer");
    }
    SUBCASE("explicit head_dim with hidden ≠ heads × head_dim is allowed") {
      cfg["head_dim"] = 4;
      cfg["num_attention_heads"] = 4;
      cfg["num_key_value_heads"] = 2;
      // q_proj now [16, 8], o_proj [8, 16]: rebuild with those shapes.
      for (int i = 0; i < 2; i++) {
        const std::string p = "model.layers." + std::to_string(i) + ".self_attn.";
        named(ts, p + "q_proj.weight") =
            make_tensor(p + "q_proj.weight", DType::F32, {16, 8}, pattern(128, i));
        named(ts, p + "k_proj.weight") =
            make_tensor(p + "k_proj.weight", DType::F32, {8, 8}, pattern(64, i));
        named(ts, p + "v_proj.weight") =
            make_tensor(p + "v_proj.weight", DType::F32, {8, 8}, pattern(64, i));
        named(ts, p + "o_proj.weight") =
            make_tensor(p + "o_proj.weight", DType::F32, {8, 16}, pattern(128, i));
      }
      write_model(tmp.path, cfg, ts);
      const LoadedModel m = load(tmp.path);
      CHECK(m.spec.head_dim == 4);
      CHECK(m.spec.q_dim() == 16);
      CHECK(m.weights.layers[0].qkv.shape == std::vector<int64_t>{32, 8});
      CHECK(m.weights.layers[0].o.shape == std::vector<int64_t>{8, 16});
    }
  }

  TEST_CASE("a table with rope_permute on q and k rewrites Meta-order rows") {
    TempDir tmp;
    const std::string model = make_subdir(tmp.path, "m");
    Dims d;  // head_dim 4: Meta rows (0,1,2,3) of a head → HF (0,2,1,3)
    auto ts = tiny_tensors(Variant::Llama, DType::F32, d);
    write_model(model, tiny_config(Variant::Llama, d), ts);
    std::ifstream in(kTables + "/llama.json");
    nlohmann::ordered_json t = nlohmann::ordered_json::parse(in);
    for (auto& w : t["weights"])
      if (w["role"] == "layer.qkv") {
        w["parts"][0]["transform"] = "rope_permute";
        w["parts"][1]["transform"] = "rope_permute";
      }
    write_file(tmp.path + "/meta.json", t.dump(2));
    LoadOptions o;
    o.table_path = tmp.path + "/meta.json";
    const LoadedModel m = load_model(model, o);
    const Tensor& qkv = m.weights.layers[1].qkv;
    const auto q = values(named(ts, "model.layers.1.self_attn.q_proj.weight"));
    const auto k = values(named(ts, "model.layers.1.self_attn.k_proj.weight"));
    const auto v = values(named(ts, "model.layers.1.self_attn.v_proj.weight"));
    auto row = [](const std::vector<float>& x, int r) {
      return std::vector<float>(x.begin() + r * 8, x.begin() + (r + 1) * 8);
    };
    const int perm[8] = {0, 2, 1, 3, 4, 6, 5, 7};  // two q heads of head_dim 4
    for (int r = 0; r < 8; r++) CHECK(rows(qkv, r, r + 1) == row(q, perm[r]));
    for (int r = 0; r < 4; r++) CHECK(rows(qkv, 8 + r, 9 + r) == row(k, perm[r]));
    for (int r = 0; r < 4; r++) CHECK(rows(qkv, 12 + r, 13 + r) == row(v, r));  // untouched
    CHECK(m.weights.layers[1].o.data ==
          m.checkpoint->tensor("model.layers.1.self_attn.o_proj.weight").data);
  }

  TEST_CASE("malformed tables fail naming the table") {
    TempDir tmp;
    std::ifstream in(kTables + "/llama_action.json");
    const nlohmann::ordered_json base = nlohmann::ordered_json::parse(in);
    const std::string p = tmp.path + "/t.json";
    auto erase_role = [](nlohmann::ordered_json& t, const std::string& role) {
      auto& w = t["weights"];
      for (size_t i = 0; i < w.size(); i++)
        if (w[i]["role"] == role) {
          w.erase(i);
          return;
        }
    };
    auto t = base;
    SUBCASE("unknown role") {
      t["weights"].push_back({{"role", "layer.qkvz"}, {"name", "x.{i}"}, {"shape", {"hidden"}}});
      write_file(p, t.dump());
      CHECK_ERROR(parse_mapping_table(p), p + ": role layer.qkvz: unknown role");
    }
    SUBCASE("a role the features need is missing") {
      erase_role(t, "pos.temporal");
      write_file(p, t.dump());
      CHECK_ERROR(parse_mapping_table(p),
                  p + ": weights: no entry for role pos.temporal, which the features need");
    }
    SUBCASE("a role the features do not use") {
      t["features"]["action_projection"] = "none";
      write_file(p, t.dump());
      CHECK_ERROR(parse_mapping_table(p),
                  "role action.0.bias is not used by the features this table declares");
    }
    SUBCASE("bad shape expression") {
      t["weights"][0]["shape"] = {"vocab", "hiden"};
      write_file(p, t.dump());
      CHECK_ERROR(parse_mapping_table(p), "role embed shape: expression \"hiden\": unknown name");
    }
    SUBCASE("typo in a key") {
      t["weights"][0]["requried"] = false;
      write_file(p, t.dump());
      CHECK_ERROR(parse_mapping_table(p), "role embed: unknown key \"requried\"");
    }
    SUBCASE("unknown spec field in config") {
      t["config"]["hiden"] = "hidden_size";
      write_file(p, t.dump());
      CHECK_ERROR(parse_mapping_table(p), p + ": config.hiden: no such spec field");
    }
    SUBCASE("unsupported feature") {
      t["features"]["norm"] = "layernorm";
      write_file(p, t.dump());
      CHECK_ERROR(parse_mapping_table(p),
                  "features: norm \"layernorm\" is not a feature value loom knows (known: "
                  "\"rms\", \"layer\")");
    }
    SUBCASE("per-layer name without {i}") {
      t["weights"][5]["name"] = "model.layers.0.input_layernorm.weight";
      write_file(p, t.dump());
      CHECK_ERROR(parse_mapping_table(p), "needs {i} (a per-layer role)");
    }
    SUBCASE("parts without merge") {
      for (auto& w : t["weights"])
        if (w["role"] == "layer.qkv") w.erase("merge");
      write_file(p, t.dump());
      CHECK_ERROR(parse_mapping_table(p),
                  "role layer.qkv: 3 parts need \"merge\": \"concat_dim0\"");
    }
  }

  TEST_CASE("the shipped tables parse and describe what they claim") {
    const MappingTable v1 = parse_mapping_table(kTables + "/llama_action.json");
    CHECK(v1.architectures == std::vector<std::string>{"LlamaActionForCausalLM"});
    CHECK(v1.features.action_projection == ActionProjection::Linear);
    CHECK(v1.features.positions == PositionKind::SpatioTemporal);
    const MappingTable v2 = parse_mapping_table(kTables + "/llama_action_v2.json");
    CHECK(v2.features.action_projection == ActionProjection::Mlp);
    CHECK(v2.features.action_mlp_layers == 3);
    const MappingTable ll = parse_mapping_table(kTables + "/llama.json");
    CHECK(ll.features.positions == PositionKind::None);
    CHECK(ll.weights.size() == 9);
  }

  TEST_CASE("testdata tiny checkpoints load when present") {
    struct Case {
      const char* dir;
      DType dtype;
      ActionProjection proj;
      bool tied;
    };
    const Case cases[] = {{"tiny_v1", DType::BF16, ActionProjection::Linear, false},
                          {"tiny_v2", DType::F32, ActionProjection::Mlp, false},
                          {"tiny_llama", DType::F16, ActionProjection::None, true}};
    for (const Case& c : cases) {
      const std::string dir = std::string(LOOM_TESTDATA) + "/" + c.dir;
      struct stat st;
      if (stat((dir + "/config.json").c_str(), &st) != 0) {
        MESSAGE("skipped: ", dir, " not generated yet");
        continue;
      }
      INFO(dir);
      const LoadedModel m = load(dir);
      CHECK(m.dtype == c.dtype);
      CHECK(m.spec.action_projection == c.proj);
      CHECK(m.spec.tied_lm_head == c.tied);
      CHECK(m.spec.has_frames() == (c.proj != ActionProjection::None));
      CHECK(m.weights.layers.size() == size_t(m.spec.layers));
      CHECK(m.weights.layers.back().qkv.shape ==
            std::vector<int64_t>{m.spec.q_dim() + 2 * m.spec.kv_dim(), m.spec.hidden});
      CHECK_FALSE(contains(m.warnings, "unused"));
    }
  }
}
