// The OPT and GPT-2 mapping tables through load_model (test_mapping.cpp has the Terra and
// Llama ones): the config checks that refuse variants the tables do not implement, GPT-2's names
// with or without "transformer.", its transposed Conv1D weights and their messages. The tiny
// checkpoints come from testdata/.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <utility>

#include "model/mapping.h"
#include "model_copy.h"
#include "safetensors_fixture.h"

using namespace loom;
using namespace loom::fixture;

TEST_CASE("OPT: config checks refuse the variants the table does not implement") {
  const std::pair<nlohmann::json, std::string> cases[] = {
      {{{"do_layer_norm_before", false}}, "\"do_layer_norm_before\" is false; "},
      {{{"_remove_final_layer_norm", true}}, "\"_remove_final_layer_norm\" is true"},
      {{{"layer_norm_elementwise_affine", false}}, "\"layer_norm_elementwise_affine\" is false"},
      {{{"enable_bias", false}}, "\"enable_bias\" is false"},
      {{{"word_embed_proj_dim", 32}}, "\"word_embed_proj_dim\" is 32 but \"hidden_size\" is 64; "},
      {{{"activation_function", "gelu"}}, "\"activation_function\" is \"gelu\""},
  };
  for (const auto& [patch, message] : cases) {
    CAPTURE(patch.dump());
    TempDir dir;
    copy_model("tiny_opt", dir.path, patch);
    CHECK_ERROR(load_model(dir.path), message);
  }
}

TEST_CASE("GPT-2: config checks; names with or without transformer.; transposed weights") {
  for (const auto& patch : {nlohmann::json{{"scale_attn_by_inverse_layer_idx", true}},
                            nlohmann::json{{"scale_attn_weights", false}},
                            nlohmann::json{{"add_cross_attention", true}}}) {
    CAPTURE(patch.dump());
    TempDir dir;
    copy_model("tiny_gpt2", dir.path, patch);
    CHECK_ERROR(load_model(dir.path), "gpt2.json supports only [");
  }
  const LoadedModel with = load_model(std::string(LOOM_TESTDATA) + "/tiny_gpt2");
  {  // GPT2Model-style names: no "transformer." prefix.
    TempDir dir;
    copy_model("tiny_gpt2", dir.path, {}, [](const std::string& n) {
      return n.rfind("transformer.", 0) == 0 ? n.substr(12) : n;
    });
    const LoadedModel without = load_model(dir.path);
    CHECK(without.spec.tied_lm_head);
    REQUIRE(without.weights.layers.size() == with.weights.layers.size());
    CHECK(without.weights.layers[1].qkv.to_f32() == with.weights.layers[1].qkv.to_f32());
    CHECK(without.weights.layers[1].down.to_f32() == with.weights.layers[1].down.to_f32());
    CHECK(std::none_of(without.warnings.begin(), without.warnings.end(),
                       [](const std::string& w) { return w.find("unused") != std::string::npos; }));
  }
  // The transposed c_attn is q|k|v rows: row r of qkv is column r of c_attn.
  {
    auto ck = Checkpoint::open(std::string(LOOM_TESTDATA) + "/tiny_gpt2");
    const std::vector<float> c_attn = ck->tensor("transformer.h.0.attn.c_attn.weight").to_f32();
    const std::vector<float> qkv = with.weights.layers[0].qkv.to_f32();
    const int H = with.spec.hidden;
    for (int r : {0, H, 2 * H + 5})
      for (int c : {0, 7, H - 1}) CHECK(qkv[size_t(r * H + c)] == c_attn[size_t(c * 3 * H + r)]);
  }
  {  // A checkpoint stored [out, in] where the table expects HF's Conv1D [in, out].
    TempDir dir;
    copy_model("tiny_gpt2", dir.path, {}, nullptr, [](FixtureTensor& f) {
      if (f.name == "transformer.h.1.mlp.c_fc.weight") std::swap(f.shape[0], f.shape[1]);
    });
    CHECK_ERROR(load_model(dir.path),
                "expected [64, 128] f32, found [128, 64] f32 for transformer.h.1.mlp.c_fc.weight "
                "(role layer.up, layer 1 in gpt2.json); the tensor is stored transposed");
  }
  {  // A missing tensor names both alternatives and the role.
    TempDir dir;
    copy_model("tiny_gpt2", dir.path, {}, [](const std::string& n) {
      return n == "transformer.h.0.ln_2.bias" ? std::string() : n;
    });
    CHECK_ERROR(load_model(dir.path),
                "missing tensor transformer.h.0.ln_2.bias (or h.0.ln_2.bias) (role "
                "layer.mlp_norm_bias, layer 0)");
  }
}
