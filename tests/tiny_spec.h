// Specs the tests describe by hand. tiny_frame_spec: the tiny frame model (the bundled
// testdata/tiny_v1 has the same layout): P = 10 image + A = 3 action slots, action_dim 3, T = 6
// frames a round, vocab 1000, linear action projection, a 1-layer 8-wide backbone nobody
// computes with. terra_spec: Terra v1 (LlamaAction, 2B), as models/llama_action.json reads its
// config.json. long_spec: a small Llama with head_dim 64 and 4,096 positions.
#pragma once

#include "model/spec.h"

namespace loom::test {

inline ModelSpec tiny_frame_spec() {
  ModelSpec s;
  s.architecture = "LlamaActionForCausalLM";
  s.hidden = 8;
  s.layers = 1;
  s.heads = s.kv_heads = 1;
  s.head_dim = 8;
  s.vocab = 1000;
  s.image_tokens = 10;
  s.action_tokens = 3;
  s.action_dim = 3;
  s.spatial_rows = 13;
  s.temporal_rows = 6;
  s.max_positions = 78;
  s.positions = PositionKind::SpatioTemporal;
  s.action_projection = ActionProjection::Linear;
  return s;
}

// A small Llama with Terra's attention shape (8 query heads on a kv head of 64, G = 8) and
// 4,096 positions: random-weight GPU tests of the decode kernels that need head_dim 64.
inline ModelSpec long_spec() {
  ModelSpec s;
  s.architecture = "LlamaForCausalLM";
  s.hidden = 512;
  s.layers = 2;
  s.heads = 8;
  s.kv_heads = 1;
  s.head_dim = 64;
  s.intermediate = 1024;
  s.vocab = 5003;
  s.max_positions = 4096;
  return s;
}

inline ModelSpec terra_spec() {
  ModelSpec s;
  s.architecture = "LlamaActionForCausalLM";
  s.hidden = 2048;
  s.layers = 22;
  s.heads = 32;
  s.kv_heads = 4;
  s.head_dim = 64;
  s.intermediate = 5632;
  s.vocab = 262145;
  s.max_positions = 14550;
  s.image_tokens = 576;
  s.action_tokens = 6;
  s.action_dim = 3;
  s.spatial_rows = 582;
  s.temporal_rows = 25;
  s.positions = PositionKind::SpatioTemporal;
  s.action_projection = ActionProjection::Linear;
  return s;
}

}  // namespace loom::test
