// Mapping tables (design §3, style.md rules 1–3): one JSON file per architecture in models/
// says how config.json keys become ModelSpec fields, which features the architecture uses,
// and, for every canonical weight role, which HF tensors make it (name templates with {i}
// for the layer), their expected shapes as expressions of spec fields, how parts merge
// (concatenated along dim 0 in the listed order), an optional transform, and whether the role
// is required or tied to another. Nothing in lib/ spells an HF tensor name; they live here.
//
// Schema (models/llama_action.json is the worked example):
//   "architectures": ["LlamaActionForCausalLM"]          config.json architectures[0] values
//   "config": { "<spec field>": "<config key>"                         required key
//             | "<spec field>": {"key": "k" | ["k1", "k2"],            first present wins
//                                "default": 1e-6 | false | "hidden/heads"} }
//             Listed in order; a default expression may use fields listed above it.
//             | "<spec field>": {"default": 1e-5}                      no config key: constant
//             | "<spec field>": {"key": k, "shape_of": ["tensor", dim]}  absent key: a tensor's dim
//   "config_checks": {"<config key>": [allowed values]   where present, must be one of these
//                   | "<config key>": {"same_as": "<other config key>"}}  equal when present
//   "features": {"norm": "rms" | "layer", "norm_affine": true, "norm_bias": false,
//                "mlp": "swiglu" | "plain",
//                "activation": "silu" | "gelu_tanh" | "gelu" | "relu"   (swiglu: silu default),
//                "qkv_bias": false, "o_bias": false, "mlp_bias": false,
//                "rotary": true,
//                "learned_positions": "none" | "absolute" | "spatio_temporal",
//                "position_offset": 2                                   (absolute only),
//                "action_projection": "none" | "linear" | "mlp" | "tokens",
//                "action_mlp_layers": 3                                 (mlp only)}
//   Every feature key is optional; the defaults are Llama's (ModelSpec's initialisers).
//   "weights": [ {"role": "embed", "name": "model.embed_tokens.weight",
//                 "shape": ["vocab", "hidden"]},
//                {"role": "layer.qkv", "merge": "concat_dim0",
//                 "parts": [{"name": "...q_proj.weight", "shape": [...],
//                            "transform": "none" | "rope_permute" | "transpose"}, ...]},
//                {"role": "lm_head", ..., "tied_to": "embed", "tied_when": "tied_lm_head",
//                 "tie_if_absent": true},
//                {"role": "...", ..., "required": false} ]
//   "name" may be a list of alternatives (first one present in the checkpoint is used).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/spec.h"

namespace loom {

struct WeightPart {
  std::vector<std::string> names;  // HF name templates, alternatives in order; "{i}" = layer
  std::vector<std::string> shape;  // one expression of spec fields per dim: "kv_heads*head_dim"
  std::string transform = "none";  // "none" | "rope_permute" (Meta → HF rotary row order) |
                                   // "transpose" (2-D; GPT-2's Conv1D [in, out] → [out, in])
};

struct WeightRule {
  std::string role;               // canonical role: "embed", "layer.qkv", "action.0.weight", …
  bool per_layer = false;         // role starts with "layer.": bound once per layer {i}
  std::vector<WeightPart> parts;  // more than one: concatenated along dim 0 in this order
  bool required = true;           // absent and not tied → error
  std::string tied_to;            // role this one reuses ("embed" for lm_head), or empty
  std::string tied_when;          // bool spec field that ties it ("tied_lm_head"), or empty
  bool tie_if_absent = false;     // reuse tied_to when the checkpoint has no part of it
};

struct ConfigField {
  std::string field;              // ModelSpec field, e.g. "kv_heads"
  std::vector<std::string> keys;  // config.json keys, first present (non-null) wins; none:
                                  // the default always applies
  nlohmann::json fallback;        // default: literal or expression string; null = required
  std::string shape_of;           // else: a checkpoint tensor whose dim `shape_dim` gives it
  int shape_dim = 0;              // ("intermediate" from Meta's w1 when params.json lacks it)
};

struct MappingTable {
  std::string path;                        // file it was read from
  std::vector<std::string> architectures;  // config.json architectures it describes
  std::vector<ConfigField> config;         // in table order
  // key → allowed values (a list), or {"same_as": other key}
  std::vector<std::pair<std::string, nlohmann::json>> config_checks;
  ModelSpec features;               // the feature fields set from "features"; the rest default
  std::vector<WeightRule> weights;  // in table order
};

// Reads and checks a table (schema, role names, expressions, features vs roles); throws
// loom::Error naming the file.
MappingTable parse_mapping_table(const std::string& path);

// Where tables are looked for: {tables_dir} if given, else $LOOM_MODELS_DIR, <exe dir>/models
// (build tree), <exe dir>/../share/loom/models (install prefix) — those that exist, in order.
// A LOOM_MODELS_DIR that is set but no folder is an error, never passed over.
std::vector<std::string> table_search_dirs(const std::string& tables_dir);

// The table file whose "architectures" lists `architecture`: the first search dir holding a
// match wins. Throws the "unknown architecture" message (config_path names the config).
std::string find_mapping_table(const std::string& architecture,
                               const std::vector<std::string>& dirs,
                               const std::string& config_path);

// Integer expression over spec fields: integers, names, + - * / and parentheses; "/" must
// divide exactly. Throws naming the expression on an unknown name or inexact division.
int64_t eval_expr(const std::string& expr, const std::map<std::string, int64_t>& vars);

// Canonical roles loom's backends read ("layer.qkv", "action.{j}.weight", …): model/roles.h.
bool is_known_role(const std::string& role);

// The ModelSpec fields a table may set, by name (the names used in "config" and in shape
// expressions). Int fields are the expression variables.
enum class FieldKind { Int, Float, Bool };
bool spec_field_kind(const std::string& field, FieldKind* kind);  // false if no such field
std::vector<std::string> spec_field_names();
std::map<std::string, int64_t> spec_int_vars(const ModelSpec& spec);
void set_spec_int(ModelSpec& spec, const std::string& field, int64_t v);
void set_spec_float(ModelSpec& spec, const std::string& field, double v);
void set_spec_bool(ModelSpec& spec, const std::string& field, bool v);
bool get_spec_bool(const ModelSpec& spec, const std::string& field);

}  // namespace loom
