// ModelSpec: every hyper-parameter and feature flag the backends need, filled from an HF
// config.json through a mapping table in models/ (model/mapping.h). One spec for every
// architecture (style.md §2): plain Llama, Terra, OPT and GPT-2 are specs with different
// feature values, and the backends branch on these fields only (style.md §14), never on a
// proxy such as has_frames().
#pragma once

#include <algorithm>
#include <vector>

#include <cstdint>
#include <string>

namespace loom {

enum class NormKind { Rms, Layer };    // RMSNorm (Llama) | LayerNorm (OPT, GPT-2)
enum class MlpKind { SwiGlu, Plain };  // act(gate) * up, then down | act(up), then down
enum class Activation { Silu, GeluTanh, Gelu, Relu };        // of the MLP; SwiGLU uses Silu
enum class PositionKind { None, Absolute, SpatioTemporal };  // learned tables added at input
// How a frame's action slots enter the model: none; a float row through a Linear or an MLP;
// or the action given as vocabulary ids in the frame (MineWorld/WHAM style).
enum class ActionProjection { None, Linear, Mlp, Tokens };

struct ModelSpec {
  std::string architecture;  // config.json architectures[0], e.g. "LlamaActionForCausalLM"
  std::string table;         // mapping table file that described it, e.g. "llama_action.json"

  // Backbone
  int hidden = 0;         // 2048 for Terra
  int layers = 0;         // 22
  int heads = 0;          // 32 query heads
  int kv_heads = 0;       // 4 (GQA)
  int head_dim = 0;       // hidden / heads unless the config says otherwise
  int intermediate = 0;   // 5632 (SwiGLU)
  int vocab = 0;          // 262145
  float rms_eps = 1e-6f;  // epsilon of every norm, RMSNorm or LayerNorm
  float rope_theta = 10000.0f;
  int max_positions = 0;  // max_position_embeddings
  bool tied_lm_head = false;
  int bos_id = -1, eos_id = -1;
  std::vector<int> more_eos;  // further end ids (Llama 3's eos_token_id list); any one stops
  bool is_eos(int token) const {
    return token == eos_id ||
           (token >= 0 && std::find(more_eos.begin(), more_eos.end(), token) != more_eos.end());
  }

  // Features (the table's "features"; issue 12 §1).
  NormKind norm = NormKind::Rms;
  bool norm_affine = true;  // norms have a scale (weight)
  bool norm_bias = false;   // LayerNorm also has a shift (bias); needs norm_affine
  MlpKind mlp = MlpKind::SwiGlu;
  Activation act = Activation::Silu;
  bool qkv_bias = false;  // biases of the q, k, v projections
  bool o_bias = false;    // bias of the attention output projection
  bool mlp_bias = false;  // biases of the MLP's input (gate_up or up) and down projections
  bool rotary = true;     // RoPE at flat position p inside attention
  PositionKind positions = PositionKind::None;
  int position_offset = 0;  // Absolute: position p reads row p + offset (OPT: 2)
  // Image slots sample only ids in [logit_begin, logit_end); logit_end 0 = the whole vocab.
  // Set by the table for models whose vocabulary also holds action (or other) ids.
  int logit_begin = 0, logit_end = 0;

  // Frame layout (design §4); all zero for plain token models.
  int image_tokens = 0;   // P: image-token slots per frame (576)
  int action_tokens = 0;  // A: action slots per frame (6)
  int action_dim = 0;     // floats per action row (3); 0 for action tokens
  int spatial_rows = 0;   // rows of pos.spatial (582 = P + A)
  int temporal_rows = 0;  // frames per round, T: rows of pos.temporal, else a config key
  ActionProjection action_projection = ActionProjection::None;
  int action_mlp_layers = 0;  // Linear layers in the action MLP (3 for V2), ReLU between

  bool has_frames() const { return image_tokens > 0; }
  int frame_slots() const { return image_tokens + action_tokens; }  // S
  int q_dim() const { return heads * head_dim; }
  int kv_dim() const { return kv_heads * head_dim; }
  // Linear layers of the action projection: 1 (linear), action_mlp_layers (MLP), else 0.
  int action_layers() const {
    return action_projection == ActionProjection::Linear ? 1
           : action_projection == ActionProjection::Mlp  ? action_mlp_layers
                                                         : 0;
  }
  // Ids an image slot may sample: [sample_begin(), sample_end()).
  int sample_begin() const { return logit_end > 0 ? logit_begin : 0; }
  int sample_end() const { return logit_end > 0 ? logit_end : vocab; }
};

}  // namespace loom
