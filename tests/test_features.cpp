// Every feature of ModelSpec reaches the CPU forward pass (issue 12 §1): a tiny random model is
// described by a table written from the spec's feature values (model/roles.h says which roles
// they need), loaded through load_model like any checkpoint, and run for one CPU step.
//   - switching any one feature changes the logits (or, for the logit range, the token);
//   - a covering set holding every pair of feature values the schema accepts loads and runs
//     without a crash, with finite logits.
// tests/cuda/test_cuda_features.cpp runs the same covering set on the CUDA backend.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <set>

#include "backend/cpu/cpu_backend.h"
#include "feature_models.h"

using namespace loom;
using namespace loom::test;

namespace {

std::vector<float> cpu_logits(const ModelSpec& features, int32_t* token = nullptr) {
  fixture::TempDir dir;
  LoadedModel m = load_feature_model(dir.path, features);
  auto cpu = make_cpu_backend();
  cpu->load(m.spec, m.weights);
  return run_feature_step(*cpu, m.spec, token);
}

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double d = 0;
  for (size_t i = 0; i < a.size(); i++) d = std::max(d, double(std::fabs(a[i] - b[i])));
  return d;
}

}  // namespace

TEST_CASE("switching any one feature changes the CPU logits") {
  ModelSpec base;  // Llama's features with a linear action projection and no learned positions
  base.action_projection = ActionProjection::Linear;
  const std::vector<float> ref = cpu_logits(base);
  for (const float v : ref) REQUIRE(std::isfinite(v));

  struct Switch {
    const char* name;
    std::function<void(ModelSpec&)> apply;
  };
  const std::vector<Switch> switches = {
      {"norm layer", [](ModelSpec& s) { s.norm = NormKind::Layer; }},
      {"norm layer + bias", [](ModelSpec& s) { s.norm = NormKind::Layer, s.norm_bias = true; }},
      {"norm_affine false", [](ModelSpec& s) { s.norm_affine = false; }},
      {"mlp plain relu", [](ModelSpec& s) { s.mlp = MlpKind::Plain, s.act = Activation::Relu; }},
      {"swiglu with gelu_tanh", [](ModelSpec& s) { s.act = Activation::GeluTanh; }},
      {"swiglu with gelu", [](ModelSpec& s) { s.act = Activation::Gelu; }},
      {"qkv_bias", [](ModelSpec& s) { s.qkv_bias = true; }},
      {"o_bias", [](ModelSpec& s) { s.o_bias = true; }},
      {"mlp_bias", [](ModelSpec& s) { s.mlp_bias = true; }},
      {"rotary off", [](ModelSpec& s) { s.rotary = false; }},
      {"rope_theta", [](ModelSpec& s) { s.rope_theta = 50.0f; }},
      {"absolute positions", [](ModelSpec& s) { s.positions = PositionKind::Absolute; }},
      {"absolute positions, offset 2",
       [](ModelSpec& s) { s.positions = PositionKind::Absolute, s.position_offset = 2; }},
      {"spatio-temporal positions",
       [](ModelSpec& s) { s.positions = PositionKind::SpatioTemporal; }},
      {"action mlp", [](ModelSpec& s) { s.action_projection = ActionProjection::Mlp; }},
      {"action tokens", [](ModelSpec& s) { s.action_projection = ActionProjection::Tokens; }},
      {"no actions", [](ModelSpec& s) { s.action_projection = ActionProjection::None; }},
      {"tied head", [](ModelSpec& s) { s.tied_lm_head = true; }},
  };
  for (const Switch& sw : switches) {
    CAPTURE(sw.name);
    ModelSpec s = base;
    sw.apply(s);
    const std::vector<float> got = cpu_logits(s);
    CHECK(max_diff(got, ref) > 1e-4);
  }
  // Absolute positions with offset 2 read other rows than offset 0.
  ModelSpec a0 = base, a2 = base;
  a0.positions = a2.positions = PositionKind::Absolute;
  a2.position_offset = 2;
  CHECK(max_diff(cpu_logits(a0), cpu_logits(a2)) > 1e-4);

  // The logit range restricts what an image slot may sample: exclude the greedy token.
  int32_t greedy = -1, ranged = -1;
  cpu_logits(base, &greedy);
  ModelSpec r = base;
  r.logit_begin = greedy + 1 < kFeatureVocab ? greedy + 1 : 0;
  r.logit_end = greedy + 1 < kFeatureVocab ? kFeatureVocab : greedy;
  const std::vector<float> rl = cpu_logits(r, &ranged);
  CHECK(max_diff(rl, ref) == 0);  // the logits are the model's; only the draw is restricted
  CHECK(ranged != greedy);
  CHECK(ranged >= r.logit_begin);
  CHECK(ranged < r.logit_end);
}

TEST_CASE("a covering set of feature combinations loads and runs on the CPU") {
  const std::vector<ModelSpec> rows = covering_set();
  const auto pairs = feature_pairs(rows);
  // Every pair of values the schema accepts appears in some row.
  CHECK(pairs.size() == accepted_pairs().size());
  CHECK(rows.size() < 40);
  MESSAGE(rows.size(), " combinations cover ", pairs.size(), " feature-value pairs");
  for (const ModelSpec& s : rows) {
    CAPTURE(describe_features(s));
    std::vector<float> logits;
    int32_t token = -1;
    CHECK_NOTHROW(logits = cpu_logits(s, &token));
    REQUIRE(logits.size() == size_t(kFeatureVocab));
    for (const float v : logits) CHECK(std::isfinite(v));
    CHECK(token >= s.sample_begin());
    CHECK(token < (s.logit_end ? s.logit_end : kFeatureVocab));
  }
}

TEST_CASE("the cpu backend refuses weights that lack a role the spec needs") {
  ModelSpec s;
  s.qkv_bias = true;
  fixture::TempDir dir;
  LoadedModel m = load_feature_model(dir.path, s);
  m.weights.layers[1].qkv_bias = Tensor{};
  auto cpu = make_cpu_backend();
  CHECK(fixture::error_of([&] { cpu->load(m.spec, m.weights); }) ==
        "cpu backend: weight layer.qkv_bias of layer 1 is missing; the spec's features need it "
        "(qkv_bias)");
}
