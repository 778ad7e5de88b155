// A Hugging Face checkpoint directory: config.json plus either model.safetensors or shards
// listed by model.safetensors.index.json. With an index, exactly the shards its weight_map
// names are opened — never every *.safetensors in the folder, so a stray or renamed shard
// lying beside the real ones cannot override weights (the vLLM/LLaVAR story in
// shared/reference/articles/vllm-llavar-weight-loading.md). Every name the weight_map lists
// must exist in the shard it points to, and no tensor may be defined by two files.
// All tensors are zero-copy views of the mmapped files.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "io/safetensors.h"

namespace loom {

class Checkpoint {
 public:
  // Opens DIR; throws loom::Error naming the file (and tensor) on any defect.
  static std::shared_ptr<Checkpoint> open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const nlohmann::json& config() const { return config_; }
  // config.json, or params.json for a Meta/Mistral-format directory that has no config.json.
  const std::string& config_path() const { return config_path_; }
  // generation_config.json where the folder has one (HF generate's defaults: its
  // eos_token_id ends generation too), else null.
  const nlohmann::json& generation_config() const { return generation_config_; }

  bool has(const std::string& name) const { return where_.count(name) != 0; }
  const SafetensorsFile::Entry* find(const std::string& name) const;  // nullptr if absent
  Tensor tensor(const std::string& name) const;  // zero-copy view; throws naming it if absent
  std::vector<std::string> names() const;        // sorted
  const std::string& file_of(const std::string& name) const;  // shard path; throws if absent
  const std::vector<SafetensorsFile>& files() const { return files_; }
  // Every file open() read: the config, the shard index (when read), the weight files.
  std::vector<std::string> input_files() const;
  uint64_t total_file_bytes() const;
  // What was odd but not wrong (a model.safetensors beside an index: the index is not read).
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  std::string dir_;
  nlohmann::json config_;
  std::string config_path_;
  nlohmann::json generation_config_;
  std::string index_path_;  // "" when no index was read
  std::vector<SafetensorsFile> files_;
  std::unordered_map<std::string, size_t> where_;  // tensor name → files_ position
  std::vector<std::string> warnings_;
};

}  // namespace loom
