// Checkpoint directory → ModelSpec + Weights, driven by a mapping table (model/table.h).
// load_model opens the checkpoint (io/checkpoint.h), picks the table by config.json
// architectures[0] (or the one given), fills the spec from config keys and defaults, checks
// it, then binds every role: each part's dtype and shape is checked against the table
// (all weights share one float dtype), merged roles are concatenated into one owned buffer,
// transformed parts are rewritten, and everything else stays a zero-copy view of the mmap.
// Checkpoint tensors no role uses are reported as warnings, never loaded.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "model/spec.h"
#include "model/table.h"
#include "model/weights.h"

namespace loom {

struct LoadOptions {
  std::string table_path;  // explicit mapping table; empty: choose by config architectures[0]
  std::string tables_dir;  // where to look; empty: $LOOM_MODELS_DIR, then beside the binary
                           // (see table_search_dirs)
};

// One bound role instance, for `loom inspect` and reports.
struct Binding {
  std::string role;                    // "layer.qkv"
  int layer = -1;                      // layer index for layer.* roles, else -1
  std::vector<std::string> templates;  // table name templates of the parts used ("…{i}…")
  std::vector<std::string> hf_names;   // checkpoint tensors read, in merge order
  std::vector<int64_t> shape;          // shape of the canonical (merged) tensor
  DType dtype = DType::F32;
  size_t bytes = 0;  // 0 when tied (shares another role's buffer)
  std::string note;  // "tied to embed", "rope_permute", "merged 3 parts"
};

struct LoadedModel {
  ModelSpec spec;
  Weights weights;
  std::string table_path;             // the table file used
  DType dtype = DType::F32;           // the one float dtype all weights share
  std::vector<Binding> bindings;      // table order; per-layer roles once per layer
  std::vector<std::string> warnings;  // unused checkpoint tensors, absent tied tensors, config
                                      // oddities: said under --quiet too
  std::vector<std::string> notes;     // facts needing no action (a tie the config asks for)
  int64_t parameters = 0;             // distinct parameters (a tied lm_head is not counted twice)
  size_t bytes = 0;                   // bytes of those parameters
  size_t step_bytes = 0;              // weights one decode step streams: all but the embedding
                                      // lookup table (lm_head counted even when tied to it)
  int64_t step_params = 0;            // the parameters of step_bytes (a backend that converts
                                      // the weights streams step_params × its element size)
  std::shared_ptr<Checkpoint> checkpoint;  // keeps the mmaps behind the views alive
};

// Throws loom::Error with file / tensor / expected-vs-found context on any defect.
LoadedModel load_model(const std::string& model_dir, const LoadOptions& opts = {});

// Config.json → spec by the table (no weights read); checks it (heads % kv_heads, frame
// layout, …). Warnings (if given) collect non-fatal oddities.
ModelSpec spec_from_config(const MappingTable& table, const nlohmann::json& config,
                           const std::string& config_path,
                           std::vector<std::string>* warnings = nullptr,
                           const Checkpoint* checkpoint = nullptr);  // for "shape_of" fields

// The mapping table a checkpoint is read through: `opts.table_path` when given, else the table
// whose "architectures" lists config.json's architectures[0] (a Meta params.json, which has no
// such list: MetaLlamaForCausalLM). Sets *arch to the architecture. Throws naming the config.
std::string choose_mapping_table(const Checkpoint& ck, const LoadOptions& opts, std::string* arch);

// spec_from_config through the table at `table_path` for the checkpoint; every error names the
// table (load_model and model/fingerprint.h read a checkpoint's spec alike).
ModelSpec checkpoint_spec(const Checkpoint& ck, const MappingTable& table,
                          const std::string& table_path, std::vector<std::string>* warnings);

// Meta → HF rotary row order (transformers' convert_llama_weights_to_hf.py `permute`): within
// each head of `head_dim` rows, Meta interleaves rotary pairs (2j, 2j+1); HF keeps the first
// halves then the second halves: dst row h*hd + a*hd/2 + j = src row h*hd + 2j + a.
// src, dst: [rows, row_bytes] bytes, rows % head_dim == 0, head_dim even; dst != src.
void rope_permute_rows(const uint8_t* src, uint8_t* dst, int64_t rows, size_t row_bytes,
                       int64_t head_dim);

}  // namespace loom
