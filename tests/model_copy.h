// Copies of the tiny testdata checkpoints, changed on the way, for tests of what loading makes
// of a config or a tensor (test_mapping.cpp, test_model_inputs.cpp).
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "io/checkpoint.h"
#include "safetensors_fixture.h"

namespace loom::fixture {

// A copy of testdata/<model> in `dir`: its config with `patch` applied, its tensors renamed by
// `rename` (return "" to drop one), optionally rewritten by `edit`, and `extra` tensors added.
inline void copy_model(const std::string& model, const std::string& dir,
                       const nlohmann::json& patch,
                       const std::function<std::string(const std::string&)>& rename = nullptr,
                       const std::function<void(FixtureTensor&)>& edit = nullptr,
                       const std::vector<FixtureTensor>& extra = {}) {
  const std::string src = std::string(LOOM_TESTDATA) + "/" + model;
  auto ck = Checkpoint::open(src);
  nlohmann::json config = ck->config();
  if (patch.is_object()) config.merge_patch(patch);
  write_file(dir + "/config.json", config.dump(1));
  std::vector<FixtureTensor> out;
  for (const std::string& n : ck->names()) {
    const std::string name = rename ? rename(n) : n;
    if (name.empty()) continue;
    const Tensor t = ck->tensor(n);
    FixtureTensor f{name, t.dtype, t.shape, {}};
    const uint8_t* p = static_cast<const uint8_t*>(t.data);
    f.bytes.assign(p, p + t.nbytes());
    if (edit) edit(f);
    out.push_back(std::move(f));
  }
  out.insert(out.end(), extra.begin(), extra.end());
  write_safetensors(dir + "/model.safetensors", out);
}

}  // namespace loom::fixture
