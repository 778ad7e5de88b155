// model_identity (fingerprint.h).
#include "model/fingerprint.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/fnv.h"
#include "io/checkpoint.h"
#include "model/mapping.h"
#include "model/table.h"

namespace loom {
namespace {

struct Fnv1a {
  uint64_t h = kFnvOffset;
  void add(const std::string& s) {
    h = (fnv1a64(s, h) ^ 0xff) * kFnvPrime;  // field separator: "ab","c" != "a","bc"
  }
};

}  // namespace

std::vector<std::string> model_input_files(const std::string& model_dir,
                                           const std::string& table_path) {
  auto ck = Checkpoint::open(model_dir);
  LoadOptions opts;
  opts.table_path = table_path;
  std::vector<std::string> files = ck->input_files();
  std::string arch;
  files.push_back(choose_mapping_table(*ck, opts, &arch));
  return files;
}

ModelIdentity model_identity(const std::string& model_dir, const std::string& table_path) {
  auto ck = Checkpoint::open(model_dir);
  ModelIdentity id;
  LoadOptions opts;
  opts.table_path = table_path;
  id.table_path = choose_mapping_table(*ck, opts, &id.architecture);
  id.spec = checkpoint_spec(*ck, parse_mapping_table(id.table_path), id.table_path, nullptr);
  id.files = ck->input_files();
  id.files.push_back(id.table_path);
  std::ifstream table(id.table_path, std::ios::binary);
  LOOM_CHECK(table.is_open(), "cannot read mapping table ", id.table_path);
  std::stringstream table_text;
  table_text << table.rdbuf();

  Fnv1a f;
  uint64_t sample = kFnvOffset;
  f.add(ck->config().dump());
  // The end ids generation_config.json adds change tokens too (only then counted: other
  // checkpoints keep the fingerprint they had).
  const nlohmann::json& g = ck->generation_config();
  if (g.is_object() && g.contains("eos_token_id"))
    f.add("generation eos " + g["eos_token_id"].dump());
  f.add(table_text.str());
  for (const SafetensorsFile& file : ck->files()) {
    f.add(std::to_string(file.file_size()));
    for (const auto& e : file.entries()) {
      f.add(e.name);
      f.add(std::to_string(int(e.dtype)));
      if (!e.foreign.empty()) f.add(e.foreign);  // only then: other fingerprints stay as they were
      for (int64_t d : e.shape) f.add(std::to_string(d));
      f.add(std::to_string(e.begin) + ":" + std::to_string(e.end));
      const char* bytes = static_cast<const char*>(file.tensor(e).data);
      const uint64_t n = e.nbytes(), k = std::min<uint64_t>(n, 4096);
      for (uint64_t at : {uint64_t(0), (n - k) / 2, n - k})
        sample = fnv1a64(std::string_view(bytes + at, k), sample);
    }
  }
  id.fingerprint = "fnv1a64:" + hex64(f.h);
  id.weights_sample = "fnv1a64:" + hex64(sample);
  return id;
}

}  // namespace loom
