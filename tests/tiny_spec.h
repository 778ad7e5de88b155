// The tiny frame model the unit tests describe by hand (the bundled testdata/tiny_v1 has the
// same layout): P = 10 image + A = 3 action slots, action_dim 3, T = 6 frames a round,
// vocab 1000, linear action projection, a 1-layer 8-wide backbone nobody computes with.
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

}  // namespace loom::test
