// Safetensors reader and checkpoint directory: valid files read back exactly; every malformed
// file or directory fails with a message naming the file and the tensor.
#include <doctest/doctest.h>

#include <functional>

#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "safetensors_fixture.h"

using namespace loom;
using namespace loom::fixture;

namespace {

std::string header_of(const nlohmann::json& j) {
  return j.dump();
}

void write_config(const std::string& dir) {
  write_file(dir + "/config.json", R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 8})");
}

}  // namespace

TEST_SUITE("safetensors") {
  TEST_CASE("a valid file reads back every dtype, shape, range, value and metadata") {
    TempDir tmp;
    const std::string path = tmp.path + "/model.safetensors";
    FixtureTensor ints{"ints", DType::I32, {2}, {7, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff}};
    FixtureTensor empty{"empty", DType::U8, {0, 3}, {}};
    write_safetensors(path,
                      {make_tensor("w", DType::F32, {2, 3}, {1, 2, 3, 4, 5, -6.5f}),
                       make_tensor("b", DType::BF16, {4}, {0.5f, -1, 3, 256}),
                       make_tensor("h", DType::F16, {1, 2}, {0.25f, -2048}), ints, empty},
                      {{"format", "pt"}});
    const SafetensorsFile f = SafetensorsFile::open(path);
    REQUIRE(f.entries().size() == 5);
    // entries sorted by name
    CHECK(f.entries()[0].name == "b");
    CHECK(f.entries()[4].name == "w");
    const auto* w = f.find("w");
    REQUIRE(w);
    CHECK(w->dtype == DType::F32);
    CHECK(w->shape == std::vector<int64_t>{2, 3});
    CHECK(w->begin == 0);
    CHECK(w->end == 24);
    const auto* b = f.find("b");
    REQUIRE(b);
    CHECK(b->begin == 24);
    CHECK(b->end == 32);
    CHECK(f.find("nope") == nullptr);
    CHECK(f.metadata().at("format") == "pt");

    const Tensor tw = f.tensor("w");
    CHECK(tw.shape == std::vector<int64_t>{2, 3});
    CHECK(tw.at(0) == 1.0f);
    CHECK(tw.at(5) == -6.5f);
    CHECK(f.tensor("b").to_f32() == std::vector<float>{0.5f, -1, 3, 256});
    CHECK(f.tensor("h").to_f32() == std::vector<float>{0.25f, -2048});
    const Tensor ti = f.tensor("ints");
    CHECK(ti.dtype == DType::I32);
    CHECK(static_cast<const int32_t*>(ti.data)[0] == 7);
    CHECK(static_cast<const int32_t*>(ti.data)[1] == -2);
    CHECK(f.tensor("empty").numel() == 0);
    CHECK_ERROR(f.tensor("nope"), "model.safetensors: no tensor \"nope\"");
  }

  TEST_CASE("a view keeps the mapping alive after the file object is gone") {
    TempDir tmp;
    const std::string path = tmp.path + "/a.safetensors";
    write_safetensors(path, {make_tensor("x", DType::F32, {3}, {9, 8, 7})});
    Tensor t;
    {
      const SafetensorsFile f = SafetensorsFile::open(path);
      t = f.tensor("x");
    }
    CHECK(t.to_f32() == std::vector<float>{9, 8, 7});
  }

  TEST_CASE("malformed files fail naming the file and the tensor") {
    TempDir tmp;
    const std::string p = tmp.path + "/bad.safetensors";
    const std::string entry16 = R"("dtype": "F32", "shape": [4], "data_offsets": [0, 16])";

    SUBCASE("truncated file") {
      write_file(p, "abcde");
      CHECK_ERROR(SafetensorsFile::open(p),
                  "bad.safetensors: file is 5 bytes, too short for a safetensors header");
    }
    SUBCASE("header length past the end of the file") {
      write_file(p, u64_le(1000) + std::string(12, ' '));
      CHECK_ERROR(SafetensorsFile::open(p),
                  "bad.safetensors: header length 1000 runs past the end of the file (20 bytes)");
    }
    SUBCASE("huge header length") {
      write_file(p, u64_le(1ull << 40) + "{}");
      CHECK_ERROR(SafetensorsFile::open(p),
                  "bad.safetensors: header length 1099511627776 exceeds the 100 MB limit");
    }
    SUBCASE("header not JSON") {
      write_raw(p, "{\"w\": {", "");
      CHECK_ERROR(SafetensorsFile::open(p), "bad.safetensors: header is not valid JSON");
    }
    SUBCASE("header not an object") {
      write_raw(p, "[1, 2]", "");
      CHECK_ERROR(SafetensorsFile::open(p), "bad.safetensors: header is not a JSON object");
    }
    SUBCASE("offsets past the data section") {
      write_raw(p, R"({"w": {"dtype": "F32", "shape": [8], "data_offsets": [0, 32]}})",
                std::string(16, '\0'));
      CHECK_ERROR(SafetensorsFile::open(p),
                  "bad.safetensors: tensor \"w\": data_offsets [0, 32] run past the data "
                  "section (16 bytes)");
    }
    SUBCASE("byte count differs from dtype x shape") {
      const std::string q = tmp.path + "/model-00002-of-00007.safetensors";
      write_raw(q,
                R"({"model.layers.3.mlp.up_proj.weight": {"dtype": "BF16", "shape": [5, 5],)"
                R"( "data_offsets": [100, 180]}})",
                std::string(200, '\0'));
      CHECK_ERROR(SafetensorsFile::open(q),
                  "model-00002-of-00007.safetensors: tensor "
                  "\"model.layers.3.mlp.up_proj.weight\": data_offsets [100, 180] hold 80 "
                  "bytes, shape [5, 5] bf16 needs 50");
    }
    SUBCASE("overlapping tensors") {
      write_raw(p,
                R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},)"
                R"( "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}})",
                std::string(24, '\0'));
      CHECK_ERROR(SafetensorsFile::open(p),
                  "bad.safetensors: tensors \"a\" [0, 16] and \"b\" [8, 24] overlap");
    }
    SUBCASE("unknown dtype") {
      write_raw(p, R"({"w": {"dtype": "F128", "shape": [2], "data_offsets": [0, 32]}})",
                std::string(32, '\0'));
      CHECK_ERROR(
          SafetensorsFile::open(p),
          "bad.safetensors: tensor \"w\": unknown dtype \"F128\" (the safetensors format "
          "has F64, F32, F16, BF16, F8_E5M2, F8_E4M3, I64, I32, I16, I8, U64, U32, U16, U8, "
          "BOOL)");
    }
    SUBCASE("a dtype loom computes with none of: its size checked, the tensor kept as foreign") {
      write_raw(p,
                R"({"m": {"dtype": "BOOL", "shape": [3], "data_offsets": [0, 3]},)"
                R"( "w": {"dtype": "F64", "shape": [2], "data_offsets": [3, 19]}})",
                std::string(19, '\0'));
      const SafetensorsFile f = SafetensorsFile::open(p);
      CHECK(f.find("m")->foreign == "BOOL");
      CHECK(f.find("w")->foreign == "F64");
      CHECK(f.find("w")->foreign_size == 8);
      write_raw(p, R"({"w": {"dtype": "F64", "shape": [2], "data_offsets": [0, 8]}})",
                std::string(8, '\0'));
      CHECK_ERROR(SafetensorsFile::open(p),
                  "bad.safetensors: tensor \"w\": data_offsets [0, 8] hold 8 bytes, shape [2] F64 "
                  "needs 16");
    }
    SUBCASE("a name listed twice (the last entry would win silently)") {
      write_raw(p,
                R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
                R"( "w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
                std::string(8, '\0'));
      CHECK_ERROR(SafetensorsFile::open(p),
                  "bad.safetensors: tensor \"w\" is listed twice in the header");
    }
    SUBCASE("bytes no tensor owns: a gap, or after the last tensor") {
      write_raw(p,
                R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
                R"( "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})",
                std::string(12, '\0'));
      CHECK_ERROR(SafetensorsFile::open(p),
                  "bad.safetensors: bytes [4, 8) of the data section belong to no tensor (before "
                  "\"b\"); expected tensors back to back");
      write_raw(p, R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})",
                std::string(6, '\0'));
      CHECK_ERROR(SafetensorsFile::open(p),
                  "bad.safetensors: the data section is 6 bytes but its tensors end at 4; "
                  "expected no bytes after the last tensor");
    }
    SUBCASE("negative shape") {
      write_raw(p, R"({"w": {"dtype": "F32", "shape": [2, -1], "data_offsets": [0, 0]}})", "");
      CHECK_ERROR(SafetensorsFile::open(p),
                  "bad.safetensors: tensor \"w\": shape [2,-1] must hold non-negative integers");
    }
    SUBCASE("begin after end") {
      write_raw(p, R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]}})",
                std::string(8, '\0'));
      CHECK_ERROR(SafetensorsFile::open(p),
                  "tensor \"w\": data_offsets [8, 4] has begin after end");
    }
    SUBCASE("shape whose byte count overflows 64 bits") {
      write_raw(p,
                R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296, 16],)"
                R"( "data_offsets": [0, 0]}})",
                "");
      CHECK_ERROR(SafetensorsFile::open(p),
                  "tensor \"w\": data_offsets [0, 0] hold 0 bytes, shape [4294967296, "
                  "4294967296, 16] f32 needs more than 2^64");
    }
    SUBCASE("missing dtype") {
      write_raw(p, R"({"w": {"shape": [4], "data_offsets": [0, 16]}})", std::string(16, '\0'));
      CHECK_ERROR(SafetensorsFile::open(p), "tensor \"w\": missing \"dtype\" string");
    }
    SUBCASE("data_offsets not a pair") {
      write_raw(p, R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [16]}})",
                std::string(16, '\0'));
      CHECK_ERROR(SafetensorsFile::open(p),
                  "tensor \"w\": \"data_offsets\" must be [begin, end] of non-negative "
                  "integers, found [16]");
    }
    SUBCASE("metadata not string to string") {
      write_raw(p, "{" + std::string(R"("__metadata__": {"n": 3}, "w": {)") + entry16 + "}}",
                std::string(16, '\0'));
      CHECK_ERROR(SafetensorsFile::open(p),
                  "\"__metadata__\" must map strings to strings; key \"n\" holds 3");
    }
    SUBCASE("missing file") {
      CHECK_ERROR(SafetensorsFile::open(tmp.path + "/none.safetensors"),
                  "none.safetensors: cannot open: No such file or directory");
    }
  }
}

TEST_SUITE("checkpoint") {
  TEST_CASE("a single-file checkpoint") {
    TempDir tmp;
    write_config(tmp.path);
    write_safetensors(tmp.path + "/model.safetensors", {make_tensor("a", DType::F32, {2}, {1, 2}),
                                                        make_tensor("b", DType::F32, {1}, {3})});
    const auto ck = Checkpoint::open(tmp.path + "/");  // trailing slash is dropped
    CHECK(ck->dir() == tmp.path);
    CHECK(ck->config()["hidden_size"] == 8);
    CHECK(ck->has("a"));
    CHECK_FALSE(ck->has("c"));
    CHECK(ck->names() == std::vector<std::string>{"a", "b"});
    CHECK(ck->file_of("b") == tmp.path + "/model.safetensors");
    CHECK(ck->tensor("a").to_f32() == std::vector<float>{1, 2});
    CHECK_ERROR(ck->tensor("c"), "no tensor \"c\" in " + tmp.path);
  }

  TEST_CASE("a sharded checkpoint opens exactly the shards its index names") {
    TempDir tmp;
    write_config(tmp.path);
    write_safetensors(tmp.path + "/model-00001-of-00002.safetensors",
                      {make_tensor("a", DType::F32, {2}, {1, 2})});
    write_safetensors(tmp.path + "/model-00002-of-00002.safetensors",
                      {make_tensor("b", DType::F32, {1}, {3})});
    // A stray shard beside the real ones (an old delta, a renamed copy) must not be read.
    write_safetensors(tmp.path + "/delta-model-00001-of-00002.safetensors",
                      {make_tensor("a", DType::F32, {2}, {-100, -200})});
    write_file(tmp.path + "/model.safetensors.index.json",
               R"({"metadata": {"total_size": 12}, "weight_map": {
                   "a": "model-00001-of-00002.safetensors",
                   "b": "model-00002-of-00002.safetensors"}})");
    auto ck = Checkpoint::open(tmp.path);
    CHECK(ck->files().size() == 2);
    CHECK(ck->tensor("a").to_f32() == std::vector<float>{1, 2});
    CHECK(ck->tensor("b").to_f32() == std::vector<float>{3});
    CHECK(ck->file_of("b") == tmp.path + "/model-00002-of-00002.safetensors");
    CHECK(ck->warnings().empty());

    // A model.safetensors beside the index wins, as in HF transformers' from_pretrained, and
    // the index left unread is said.
    write_safetensors(tmp.path + "/model.safetensors",
                      {make_tensor("a", DType::F32, {2}, {-1, -1})});
    ck = Checkpoint::open(tmp.path);
    CHECK(ck->files().size() == 1);
    CHECK(ck->tensor("a").to_f32() == std::vector<float>{-1, -1});
    CHECK(!ck->has("b"));
    REQUIRE(ck->warnings().size() == 1);
    CHECK(ck->warnings()[0].find("holds both model.safetensors and model.safetensors.index.json: "
                                 "reading model.safetensors, as HF transformers does") !=
          std::string::npos);
  }

  TEST_CASE("malformed checkpoint directories fail naming the file and tensor") {
    TempDir tmp;
    const std::string d = tmp.path;
    const std::string s1 = "model-00001-of-00002.safetensors";
    const std::string s2 = "model-00002-of-00002.safetensors";
    write_config(d);

    SUBCASE("index naming a missing shard") {
      write_safetensors(d + "/" + s1, {make_tensor("a", DType::F32, {1}, {1})});
      write_file(d + "/model.safetensors.index.json",
                 R"({"weight_map": {"a": ")" + s1 + R"(", "b": ")" + s2 + R"("}})");
      CHECK_ERROR(Checkpoint::open(d), d + "/model.safetensors.index.json names shard \"" + s2 +
                                           "\", which does not exist in " + d);
    }
    SUBCASE("index naming a tensor absent from its shard") {
      write_safetensors(d + "/" + s1, {make_tensor("a", DType::F32, {1}, {1})});
      write_safetensors(d + "/" + s2, {make_tensor("b", DType::F32, {1}, {2})});
      write_file(d + "/model.safetensors.index.json",
                 R"({"weight_map": {"a": ")" + s1 + R"(", "b": ")" + s1 + R"("}})");
      CHECK_ERROR(Checkpoint::open(d),
                  d + "/model.safetensors.index.json: tensor \"b\" is mapped to \"" + s1 +
                      "\", which does not contain it");
    }
    SUBCASE("the same tensor in two shards") {
      write_safetensors(d + "/" + s1, {make_tensor("a", DType::F32, {1}, {1})});
      write_safetensors(d + "/" + s2, {make_tensor("a", DType::F32, {1}, {2}),
                                       make_tensor("b", DType::F32, {1}, {3})});
      write_file(d + "/model.safetensors.index.json",
                 R"({"weight_map": {"a": ")" + s1 + R"(", "b": ")" + s2 + R"("}})");
      CHECK_ERROR(Checkpoint::open(d),
                  "tensor \"a\" is defined twice: in " + d + "/" + s1 + " and in " + d + "/" + s2);
    }
    SUBCASE("a bad shard is named in the error") {
      write_safetensors(d + "/" + s1, {make_tensor("a", DType::F32, {1}, {1})});
      write_file(d + "/" + s2, "xyz");
      write_file(d + "/model.safetensors.index.json",
                 R"({"weight_map": {"a": ")" + s1 + R"(", "b": ")" + s2 + R"("}})");
      CHECK_ERROR(Checkpoint::open(d), d + "/" + s2 + ": file is 3 bytes");
    }
    SUBCASE("index without weight_map") {
      write_file(d + "/model.safetensors.index.json", R"({"metadata": {}})");
      CHECK_ERROR(Checkpoint::open(d),
                  d + "/model.safetensors.index.json: no \"weight_map\" object");
    }
    SUBCASE("index naming a shard outside the directory") {
      write_file(d + "/model.safetensors.index.json",
                 R"({"weight_map": {"a": "../x.safetensors"}})");
      CHECK_ERROR(Checkpoint::open(d), "shard name \"../x.safetensors\" must be a file inside");
    }
    SUBCASE("no weights at all") {
      CHECK_ERROR(Checkpoint::open(d),
                  "no model.safetensors or model.safetensors.index.json in " + d);
    }
    SUBCASE("missing config.json") {
      std::remove((d + "/config.json").c_str());
      write_safetensors(d + "/model.safetensors", {make_tensor("a", DType::F32, {1}, {1})});
      CHECK_ERROR(Checkpoint::open(d), "missing " + d + "/config.json");
    }
    SUBCASE("config.json not JSON") {
      write_file(d + "/config.json", "{\"hidden_size\": ");
      CHECK_ERROR(Checkpoint::open(d), d + "/config.json: not valid JSON");
    }
    SUBCASE("directory that does not exist") {
      CHECK_ERROR(Checkpoint::open(d + "/nope"),
                  "model directory " + d + "/nope does not exist or is not a directory");
    }
  }
}
