// The embed family's references (kernels/embed.h) against hand-computed values. A header of test
// cases: tests/test_ops_ref.cpp runs it in every build, tests/cuda/ops/test_embed.cpp beside the
// kernel checks.
#pragma once

#include <doctest/doctest.h>

#include <vector>

#include "kernels/embed.h"

TEST_CASE("cpu::action_input_layer and cpu::embed_assemble give fixed values") {
  using namespace loom;
  // Action rows [1, 2] and [3, 4]; output row 0 reads row 1: w·[3, 4] + b = [3.5, -1.5].
  const std::vector<float> actions = {1, 2, 3, 4}, w = {1, 0, 1, -1}, b = {0.5f, -0.5f};
  const std::vector<int32_t> act_slots = {1};
  std::vector<float> act(2);
  ActionInputArgs in;
  in.actions = actions.data();
  in.action_dim = 2;
  in.act_slots = act_slots.data();
  in.n_act = 1;
  in.w = w.data();
  in.b = b.data();
  in.hidden = 2;
  in.out_t = DType::F32;
  in.out = act.data();
  cpu::action_input_layer(in);
  CHECK(act == std::vector<float>{3.5f, -1.5f});
  in.relu = true;
  cpu::action_input_layer(in);
  CHECK(act == std::vector<float>{3.5f, 0.0f});

  // Slots: token 2, the action row, token 0; frame of S = 2 slots; positions 0, 1, 2 read
  // spatial rows 0, 1, 0 and temporal rows 0, 0, 1.
  const std::vector<float> embed = {1, 2, 3, 4, 5, 6}, act_out = {10, 20};
  const std::vector<float> ps = {0.5f, 0.5f, 1, 1}, pt = {100, 100, 200, 200};
  const std::vector<int32_t> tokens = {2, -1, 0}, positions = {0, 1, 2}, act_row = {-1, 0, -1};
  std::vector<float> x(6);
  EmbedArgs e;
  e.t = DType::F32;
  e.tokens = tokens.data();
  e.positions = positions.data();
  e.act_row = act_row.data();
  e.embed = embed.data();
  e.act_out = act_out.data();
  e.vocab = 3;
  e.n_slots = 3;
  e.hidden = 2;
  e.x = x.data();
  cpu::embed_assemble(e);  // no frame layout: the rows alone
  CHECK(x == std::vector<float>{5, 6, 10, 20, 1, 2});
  e.pos_spatial = ps.data();
  e.pos_temporal = pt.data();
  e.frame_slots = 2;
  e.spatial_rows = 2;
  e.temporal_rows = 2;
  cpu::embed_assemble(e);
  CHECK(x == std::vector<float>{105.5f, 106.5f, 111, 121, 201.5f, 202.5f});
}
