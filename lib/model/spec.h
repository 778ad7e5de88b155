// ModelSpec: every hyper-parameter and feature flag the backends need, filled from an HF
// config.json through a mapping table in models/ (model/mapping.h). One spec for every
// architecture of the family (style.md §2): plain Llama is a spec with no frame layout.
#pragma once

#include <cstdint>
#include <string>

namespace loom {

enum class ActionProjection { None, Linear, Mlp };

struct ModelSpec {
  std::string architecture;  // config.json architectures[0], e.g. "LlamaActionForCausalLM"
  std::string table;         // mapping table file that described it, e.g. "llama_action.json"

  // Llama backbone
  int hidden = 0;        // 2048 for Terra
  int layers = 0;        // 22
  int heads = 0;         // 32 query heads
  int kv_heads = 0;      // 4 (GQA)
  int head_dim = 0;      // hidden / heads unless the config says otherwise
  int intermediate = 0;  // 5632 (SwiGLU)
  int vocab = 0;         // 262145
  float rms_eps = 1e-6f;
  float rope_theta = 10000.0f;
  int max_positions = 0;  // max_position_embeddings
  bool tied_lm_head = false;
  int bos_id = -1, eos_id = -1;

  // Frame layout (design §4); all zero for plain Llama.
  int image_tokens = 0;     // P: image-token slots per frame (576)
  int action_tokens = 0;    // A: action slots per frame (6)
  int action_dim = 0;       // floats per action row (3)
  int spatial_rows = 0;     // rows of pos.spatial (582 = P + A)
  int temporal_rows = 0;    // rows of pos.temporal (25): frames per round, T
  ActionProjection action_projection = ActionProjection::None;
  int action_mlp_layers = 0;  // Linear layers in the action MLP (3 for V2), ReLU between

  bool has_frames() const { return image_tokens > 0; }
  int frame_slots() const { return image_tokens + action_tokens; }  // S
  int q_dim() const { return heads * head_dim; }
  int kv_dim() const { return kv_heads * head_dim; }
};

}  // namespace loom
