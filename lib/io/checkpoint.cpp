#include "io/checkpoint.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "core/error.h"

namespace loom {

namespace {

bool is_file(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool is_dir(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

nlohmann::json read_json_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("missing ", path, " (", what, ")");
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::exception& e) {
    fail(path, ": not valid JSON: ", e.what());
  }
}

std::string quoted(const std::string& s) {
  return "\"" + s + "\"";
}

}  // namespace

std::vector<std::string> Checkpoint::input_files() const {
  std::vector<std::string> v{config_path_};
  if (!index_path_.empty()) v.push_back(index_path_);
  for (const SafetensorsFile& f : files_) v.push_back(f.path());
  return v;
}

std::shared_ptr<Checkpoint> Checkpoint::open(const std::string& dir_in) {
  auto ck = std::make_shared<Checkpoint>();
  std::string dir = dir_in;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  ck->dir_ = dir;
  if (!is_dir(dir)) fail("model directory ", dir, " does not exist or is not a directory");

  // Meta/Mistral releases carry params.json instead of config.json; a table maps its keys.
  ck->config_path_ = dir + "/config.json";
  if (!is_file(ck->config_path_) && is_file(dir + "/params.json"))
    ck->config_path_ = dir + "/params.json";
  ck->config_ = read_json_file(ck->config_path_, "every HF checkpoint directory has one");
  if (!ck->config_.is_object()) fail(ck->config_path_, ": not a JSON object");
  if (is_file(dir + "/generation_config.json")) {
    ck->generation_config_ = read_json_file(dir + "/generation_config.json", "generation defaults");
    if (!ck->generation_config_.is_object())
      fail(dir, "/generation_config.json: not a JSON object");
  }

  const std::string index_path = dir + "/model.safetensors.index.json";
  const std::string single_path = dir + "/model.safetensors";
  // weight_map name → shard file name, as the index lists it (empty without an index).
  std::map<std::string, std::string> weight_map;
  std::vector<std::string> shard_names;
  if (is_file(single_path)) {
    // As HF transformers' from_pretrained: model.safetensors wins over an index beside it.
    shard_names.push_back("model.safetensors");
    if (is_file(index_path))
      ck->warnings_.push_back(cat(dir, " holds both model.safetensors and ",
                                  "model.safetensors.index.json: reading model.safetensors, as HF "
                                  "transformers does; remove the one that is stale"));
  } else if (is_file(index_path)) {
    // Only the shards the index names are read: a stray shard in the folder changes nothing.
    const nlohmann::json index = read_json_file(index_path, "shard index");
    ck->index_path_ = index_path;
    auto wm = index.is_object() ? index.find("weight_map") : index.end();
    if (!index.is_object() || wm == index.end() || !wm->is_object())
      fail(index_path, ": no \"weight_map\" object");
    for (auto it = wm->begin(); it != wm->end(); ++it) {
      if (!it.value().is_string())
        fail(index_path, ": weight_map entry ", quoted(it.key()), " must name a shard file");
      const std::string shard = it.value().get<std::string>();
      if (shard.empty() || shard[0] == '/' || shard.find("..") != std::string::npos)
        fail(index_path, ": shard name ", quoted(shard), " must be a file inside ", dir);
      weight_map[it.key()] = shard;
      if (std::find(shard_names.begin(), shard_names.end(), shard) == shard_names.end())
        shard_names.push_back(shard);
    }
    if (shard_names.empty()) fail(index_path, ": weight_map is empty");
    std::sort(shard_names.begin(), shard_names.end());
    for (const std::string& s : shard_names)
      if (!is_file(dir + "/" + s))
        fail(index_path, " names shard ", quoted(s), ", which does not exist in ", dir);
  } else if (is_file(dir + "/consolidated.safetensors")) {  // Mistral's own release layout
    shard_names.push_back("consolidated.safetensors");
  } else {
    // PyTorch pickles are never read (they run code): say how to convert them.
    std::string pickle;
    if (DIR* d = opendir(dir.c_str())) {
      while (dirent* e = readdir(d)) {
        const std::string n = e->d_name;
        for (const char* ext : {".pth", ".bin", ".pt"})
          if (pickle.empty() && n.size() > strlen(ext) &&
              n.compare(n.size() - strlen(ext), strlen(ext), ext) == 0)
            pickle = n;
      }
      closedir(d);
    }
    fail("no model.safetensors or model.safetensors.index.json in ", dir,
         pickle.empty() ? std::string()
                        : cat("; ", pickle,
                              " is a PyTorch pickle, which loom does not read: "
                              "convert it with scripts/convert_meta.py (Meta's "
                              "consolidated.*.pth) or save_pretrained(..., "
                              "safe_serialization=True)"));
  }

  for (const std::string& s : shard_names) {
    ck->files_.push_back(SafetensorsFile::open(dir + "/" + s));
    const size_t fi = ck->files_.size() - 1;
    for (const auto& e : ck->files_[fi].entries()) {
      auto [it, inserted] = ck->where_.emplace(e.name, fi);
      if (!inserted)
        fail("tensor ", quoted(e.name), " is defined twice: in ", ck->files_[it->second].path(),
             " and in ", ck->files_[fi].path());
    }
  }

  for (const auto& [name, shard] : weight_map) {
    auto it = ck->where_.find(name);
    const std::string shard_path = dir + "/" + shard;
    if (it == ck->where_.end() || ck->files_[it->second].path() != shard_path)
      fail(index_path, ": tensor ", quoted(name), " is mapped to ", quoted(shard),
           ", which does not contain it");
  }
  return ck;
}

const SafetensorsFile::Entry* Checkpoint::find(const std::string& name) const {
  auto it = where_.find(name);
  return it == where_.end() ? nullptr : files_[it->second].find(name);
}

Tensor Checkpoint::tensor(const std::string& name) const {
  auto it = where_.find(name);
  if (it == where_.end()) fail("no tensor ", quoted(name), " in ", dir_);
  return files_[it->second].tensor(name);
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(where_.size());
  for (const auto& kv : where_) out.push_back(kv.first);
  std::sort(out.begin(), out.end());
  return out;
}

const std::string& Checkpoint::file_of(const std::string& name) const {
  auto it = where_.find(name);
  if (it == where_.end()) fail("no tensor ", quoted(name), " in ", dir_);
  return files_[it->second].path();
}

uint64_t Checkpoint::total_file_bytes() const {
  uint64_t n = 0;
  for (const auto& f : files_) n += f.file_size();
  return n;
}

}  // namespace loom
