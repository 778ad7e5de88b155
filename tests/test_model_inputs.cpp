// What loading refuses or says about a checkpoint that would otherwise run wrongly or die later
// (the models-as-data audit of 2026-12-05): a tensor of the checkpoint no role uses beside
// bound ones, weights of a dtype loom has no kernels for, a round of one frame, image ids that
// leave no room for action ids, frame sizes past int32, Meta's vocab_size -1, a Meta folder
// without --model-table, and a LOOM_MODELS_DIR that is no folder. On copies of testdata/.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "model/mapping.h"
#include "model_copy.h"

using namespace loom;
using namespace loom::fixture;

namespace {

std::string load_error(const std::string& dir) {
  try {
    load_model(dir);
  } catch (const Error& e) {
    return e.what();
  }
  return "(loaded)";
}

bool has(const std::vector<std::string>& v, const std::string& needle) {
  for (const std::string& s : v)
    if (s.find(needle) != std::string::npos) return true;
  return false;
}

FixtureTensor bf16(const std::string& name, int64_t n, int seed) {
  return make_tensor(name, DType::BF16, {n}, pattern(n, seed));
}

}  // namespace

TEST_CASE("a bias beside a bound weight that no role uses is an error; other strays warn") {
  TempDir dir;
  copy_model("tiny_v1", dir.path, {}, nullptr, nullptr,
             {bf16("model.layers.0.self_attn.q_proj.bias", 64, 1),
              bf16("model.layers.1.self_attn.q_proj.bias", 64, 2)});
  const std::string e = load_error(dir.path);
  CHECK(e.find("model.layers.0.self_attn.q_proj.bias belongs to module "
               "model.layers.0.self_attn.q_proj, whose other tensors llama_action.json binds, but "
               "no role uses it (nor 1 more like it: model.layers.1.self_attn.q_proj.bias); "
               "loom's output would differ from the model's") != std::string::npos);
  CHECK(e.find(dir.path + "/model.safetensors: ") == 0);

  // A buffer of a module loom computes nothing of (rotary inv_freq; a bool mask of a dtype
  // loom has no kernels for): one warning each, and the model loads.
  TempDir ok;
  FixtureTensor mask{"model.layers.0.self_attn.causal_mask", DType::U8, {4}, {1, 1, 0, 1}, "BOOL"};
  copy_model(
      "tiny_v1", ok.path, {}, nullptr, nullptr,
      {make_tensor("model.layers.0.self_attn.rotary_emb.inv_freq", DType::F32, {2}, {1, 2}), mask});
  const LoadedModel m = load_model(ok.path);
  CHECK(m.warnings.size() == 2);
  CHECK(has(m.warnings, "unused checkpoint tensor model.layers.0.self_attn.causal_mask"));
  CHECK(has(m.warnings, "unused checkpoint tensor model.layers.0.self_attn.rotary_emb.inv_freq"));
  // Warnings show under --quiet too (it leaves out progress, summaries and notes; a Slurm log
  // of `run -q` kept none of a model's warnings).
  TempDir out;
  const std::string err = out.path + "/stderr.txt";
  const int rc = std::system((std::string(LOOM_BIN_DIR) + "/loom run -q --backend cpu --model " +
                              ok.path + " --jobs " + LOOM_TESTDATA + "/jobs/tiny_v1.jsonl --out " +
                              out.path + "/r.jsonl 2> " + err)
                                 .c_str());
  CHECK(rc == 0);
  std::ifstream in(err);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(
      text.find("warning: unused checkpoint tensor model.layers.0.self_attn.rotary_emb.inv_freq") !=
      std::string::npos);

  // A weight of its own module beside bound ones (Qwen3's q_norm read through a Llama table):
  // math the table leaves out as well, not a buffer (only a warning: HF-different tokens).
  TempDir qk;
  copy_model("tiny_v1", qk.path, {}, nullptr, nullptr,
             {bf16("model.layers.0.self_attn.q_norm.weight", 8, 3)});
  CHECK(load_error(qk.path).find("model.layers.0.self_attn.q_norm.weight belongs to module "
                                 "model.layers.0.self_attn.q_norm in model.layers.0.self_attn, "
                                 "whose other modules' tensors llama_action.json binds, but no "
                                 "role uses it") != std::string::npos);
}

TEST_CASE("a weight of a dtype loom computes with none of is refused, naming dtype and role") {
  TempDir dir;
  copy_model("tiny_v1", dir.path, {}, nullptr, [](FixtureTensor& f) {
    if (f.name != "model.norm.weight") return;
    f.bytes.resize(f.bytes.size() * 4);  // bf16 → F64: the same element count
    f.st_name = "F64";
  });
  CHECK(load_error(dir.path).find("model.norm.weight is F64; weights must be bf16, f16 or f32 "
                                  "(role final_norm)") != std::string::npos);
}

TEST_CASE("frame layouts that could never run are refused at load, naming the config key") {
  TempDir dir;
  copy_model("tiny_v1", dir.path, {{"num_temporal_embeddings", 1}}, nullptr, [](FixtureTensor& f) {
    if (f.name.find("temporal_embeddings") != std::string::npos) {
      f.bytes.resize(f.bytes.size() / size_t(f.shape[0]));
      f.shape[0] = 1;
    }
  });
  CHECK(load_error(dir.path).find(
            "config.json: temporal_rows (frames per round, T) (config \"num_temporal_embeddings\")"
            " is 1; a round must hold at least 2 frames (one carried over, one new)") !=
        std::string::npos);

  TempDir tokens;
  copy_model("tiny_action_tokens", tokens.path, {{"frames_per_round", 1}});
  CHECK(load_error(tokens.path).find("a round must hold at least 2 frames") != std::string::npos);

  // Image ids over the whole vocab leave none for the action tokens every frame carries.
  copy_model("tiny_action_tokens", tokens.path, {{"image_vocab_size", 512}});
  CHECK(load_error(tokens.path)
            .find("config.json: image ids [0, 512) (config \"image_vocab_size\") take the whole "
                  "vocab of 512, leaving no ids for action tokens") != std::string::npos);

  // P + A past int32 is said as such, not as a negative sum.
  copy_model("tiny_action_tokens", tokens.path,
             {{"num_image_patches", 2147483646}, {"frames_per_round", 2}});
  CHECK(load_error(tokens.path)
            .find("image_tokens 2147483646 + action_tokens 3 slots a frame; expected at most "
                  "2^24") != std::string::npos);
}

TEST_CASE("a Meta folder: its table found without --model-table, vocab_size -1 read from shape") {
  TempDir dir;
  const std::string src = std::string(LOOM_TESTDATA) + "/tiny_llama_meta";
  std::filesystem::copy_file(src + "/model.safetensors", dir.path + "/model.safetensors");
  std::ifstream in(src + "/params.json");
  nlohmann::json params = nlohmann::json::parse(in);
  params["vocab_size"] = -1;  // as Meta's Llama-2 releases write it
  write_file(dir.path + "/params.json", params.dump());
  const LoadedModel m = load_model(dir.path);
  CHECK(m.spec.table == "llama_meta.json");
  CHECK(m.spec.architecture == "MetaLlamaForCausalLM");
  CHECK(m.spec.vocab == 1000);  // tok_embeddings.weight's rows
}

TEST_CASE("LOOM_MODELS_DIR that is no folder is an error, not silently passed over") {
  ::setenv("LOOM_MODELS_DIR", "/nonexistent/loom-tables", 1);
  const std::string e = load_error(std::string(LOOM_TESTDATA) + "/tiny_llama");
  ::unsetenv("LOOM_MODELS_DIR");
  CHECK(e ==
        "LOOM_MODELS_DIR=/nonexistent/loom-tables is not a folder; expected the folder of "
        "mapping tables (unset it to use loom's own)");
}

TEST_CASE("OPT as the Hub stores it (decoder.*, no model. prefix) loads as model.decoder.* does") {
  TempDir hub;
  copy_model("tiny_opt", hub.path, {},
             [](const std::string& n) { return n.rfind("model.", 0) == 0 ? n.substr(6) : n; });
  const LoadedModel a = load_model(hub.path);
  const LoadedModel b = load_model(std::string(LOOM_TESTDATA) + "/tiny_opt");
  CHECK(a.weights.layers[1].qkv.to_f32() == b.weights.layers[1].qkv.to_f32());
  CHECK(a.weights.pos_absolute.to_f32() == b.weights.pos_absolute.to_f32());
  CHECK(a.warnings == b.warnings);
}

TEST_CASE("unused buffers of every layer: one warning a name pattern") {
  TempDir dir;
  std::vector<FixtureTensor> masks;
  for (int i = 0; i < 2; ++i)
    masks.push_back(FixtureTensor{"transformer.h." + std::to_string(i) + ".attn.bias",
                                  DType::U8,
                                  {1, 1, 4, 4},
                                  std::vector<uint8_t>(16, 1),
                                  "BOOL"});
  copy_model("tiny_gpt2", dir.path, {}, nullptr, nullptr, masks);
  const LoadedModel m = load_model(dir.path);
  CHECK(has(m.warnings,
            "unused checkpoint tensor transformer.h.{i}.attn.bias ×2 "
            "(model.safetensors): no role in gpt2.json uses it"));
}

TEST_CASE("Mistral's release layout: consolidated.safetensors read; sliding_window refused") {
  TempDir dir;
  const std::string src = std::string(LOOM_TESTDATA) + "/tiny_llama_meta";
  std::filesystem::copy_file(src + "/model.safetensors", dir.path + "/consolidated.safetensors");
  std::ifstream in(src + "/params.json");
  nlohmann::json params = nlohmann::json::parse(in);
  write_file(dir.path + "/params.json", params.dump());
  CHECK(load_model(dir.path).spec.table == "llama_meta.json");
  // Mistral 7B v0.1 attends within a window of 4096: loom attends to every position.
  params["sliding_window"] = 4096;
  write_file(dir.path + "/params.json", params.dump());
  CHECK(load_error(dir.path).find("params.json: \"sliding_window\" is 4096; ") !=
        std::string::npos);
  // A folder of PyTorch pickles only is said as such, with the way to convert it.
  std::filesystem::remove(dir.path + "/consolidated.safetensors");
  write_file(dir.path + "/consolidated.00.pth", "not read");
  CHECK(load_error(dir.path).find("consolidated.00.pth is a PyTorch pickle, which loom does not "
                                  "read: convert it with scripts/convert_meta.py") !=
        std::string::npos);
}

// HF's MistralForCausalLM config read through llama.json (--model-table: its architecture is not
// listed): a window ran as full attention, tokens other than HF's, exit 0.
TEST_CASE("llama.json refuses a config with a sliding window; a null one is no window") {
  TempDir dir;
  copy_model("tiny_llama", dir.path, {{"sliding_window", 4}});
  CHECK(load_error(dir.path).find("\"sliding_window\" is 4; ") != std::string::npos);
  copy_model("tiny_llama", dir.path, {{"sliding_window", nullptr}});
  CHECK(load_model(dir.path).spec.table == "llama.json");
}

TEST_CASE("an eos_token_id list (Llama 3): every id ends a sample, as in HF's generate") {
  TempDir dir;
  copy_model("tiny_llama", dir.path, {{"eos_token_id", {2, 948, 17}}});
  const LoadedModel m = load_model(dir.path);
  CHECK(m.spec.eos_id == 2);
  CHECK(m.spec.more_eos == std::vector<int>{948, 17});
  CHECK(m.spec.is_eos(2));
  CHECK(m.spec.is_eos(948));
  CHECK(m.spec.is_eos(17));
  CHECK_FALSE(m.spec.is_eos(998));
  CHECK_FALSE(has(m.warnings, "is a list"));
  copy_model("tiny_llama", dir.path, {{"eos_token_id", {2, 4096}}});
  CHECK(load_error(dir.path).find("eos id 4096 must lie in [0, ") != std::string::npos);
}
