// Mapping tables under seeded mutation (issue 12, "Bad input"): every bundled table (models/),
// changed by one to three structure-aware edits — a value replaced, a key or list entry
// dropped or added, a string or number nudged, a piece swapped in from another table, or a
// raw byte edit — goes through fuzz/harness.h's table_input (parse_mapping_table + load_model
// on the tiny checkpoint the table was made for, then check_weights). Each either loads, and
// then also loads on the CPU backend and runs one step, or throws loom::Error naming the table;
// a crash, any other exception or an unnamed table fails. The libFuzzer target
// fuzz/fuzz_tables.cpp runs the same harness on arbitrary bytes.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/cpu/cpu_backend.h"
#include "feature_models.h"
#include "fuzz/harness.h"

namespace {

using ojson = nlohmann::ordered_json;
using Pointer = ojson::json_pointer;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every node below the root, as JSON pointers.
void pointers(const ojson& j, const Pointer& at, std::vector<Pointer>& out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      out.push_back(at / it.key());
      pointers(it.value(), at / it.key(), out);
    }
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); i++) {
      out.push_back(at / i);
      pointers(j[i], at / i, out);
    }
  }
}

void strings_and_keys(const ojson& j, std::set<std::string>& strings, std::set<std::string>& keys) {
  if (j.is_string()) strings.insert(j.get<std::string>());
  if (j.is_object())
    for (auto it = j.begin(); it != j.end(); ++it) {
      keys.insert(it.key());
      strings_and_keys(it.value(), strings, keys);
    }
  if (j.is_array())
    for (const auto& e : j) strings_and_keys(e, strings, keys);
}

class TableMutator {
 public:
  TableMutator(std::vector<ojson> tables, uint32_t seed) : tables_(std::move(tables)), rng_(seed) {
    std::set<std::string> strings, keys;
    for (const ojson& t : tables_) strings_and_keys(t, strings, keys);
    strings_.assign(strings.begin(), strings.end());
    keys_.assign(keys.begin(), keys.end());
    for (const char* s : {"", "{i}", "hidden/0", "(hidden", "hidden*hidden*hidden*hidden*hidden",
                          "vocab+1", "heads*head_dim*2", "layer.qkv", "action.7.weight",
                          "action.{j}.weight", "nope", "transpose", "rope_permute", "tokens",
                          "spatio_temporal", "absolute", "layer", "plain", "gelu_tanh"})
      strings_.push_back(s);
    for (const char* k : {"bogus", "logit_begin", "logit_end", "position_offset",
                          "action_mlp_layers", "norm_bias", "rotary", "shape_of", "same_as"})
      keys_.push_back(k);
    values_ = {0,
               -1,
               1,
               2,
               3,
               64,
               1000000,
               2147483647,
               4294967296LL,
               -2147483649LL,
               1.5,
               1e-5,
               1e300,
               true,
               false,
               nullptr,
               ojson::array(),
               ojson::object(),
               ojson::array({"x"}),
               ojson::array({1, 2}),
               ojson::array({"hidden", "hidden"}),
               ojson{{"key", "hidden_size"}},
               ojson{{"default", 0}},
               ojson{{"default", "hidden/heads"}},
               ojson{{"key", "nope"}, {"default", 7}},
               ojson{{"shape_of", ojson::array({"model.embed_tokens.weight", 0})}},
               ojson{{"same_as", "hidden_size"}}};
  }

  // A table with 1–3 edits, as text (some edits are to the text itself).
  std::string mutate(size_t which) {
    ojson t = tables_[which];
    const int edits = 1 + int(rng_() % 3);
    for (int e = 0; e < edits; e++) edit(t, which);
    std::string text = t.dump(1);
    if (rng_() % 10 == 0) text_edit(text);
    return text;
  }

 private:
  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[rng_() % v.size()];
  }

  ojson value() {
    switch (rng_() % 3) {
      case 0:
        return pick(values_);
      case 1:
        return pick(strings_);
      default: {  // a piece of another table
        const ojson& other = pick(tables_);
        std::vector<Pointer> ps;
        pointers(other, Pointer(), ps);
        return other.at(pick(ps));
      }
    }
  }

  void edit(ojson& t, size_t which) {
    std::vector<Pointer> ps;
    pointers(t, Pointer(), ps);
    if (ps.empty()) return;
    const Pointer p = pick(ps);
    ojson& node = t.at(p);
    ojson& parent = t.at(p.parent_pointer());
    switch (rng_() % 7) {
      case 0:  // replace the node
        node = value();
        break;
      case 1:  // drop it
        if (parent.is_object())
          parent.erase(p.back());
        else
          parent.erase(parent.begin() + long(std::stoul(p.back())));
        break;
      case 2:  // add a key or list entry
        if (node.is_object())
          node[pick(keys_)] = value();
        else if (node.is_array())
          node.insert(node.begin() + long(rng_() % (node.size() + 1)),
                      node.empty() ? value() : node[rng_() % node.size()]);
        else
          node = value();
        break;
      case 3:  // nudge a string
        if (node.is_string()) {
          std::string s = node.get<std::string>();
          const int how = int(rng_() % 4);
          if (how == 0 && !s.empty()) s.pop_back();
          if (how == 1) s += pick(std::vector<std::string>{"x", "0", "{i}", ".weight", "*2"});
          if (how == 2 && !s.empty()) s[rng_() % s.size()] = char('a' + rng_() % 26);
          if (how == 3) s = pick(strings_);
          node = s;
        } else {
          node = value();
        }
        break;
      case 4:  // nudge a number
        if (node.is_number_integer()) {
          const int64_t v = node.get<int64_t>();
          node = pick(std::vector<int64_t>{v + 1, v - 1, 2 * v, -v, 0, v * 1000003});
        } else if (node.is_number()) {
          node = pick(std::vector<double>{0.0, -1.0, 1e-30, 1e30, node.get<double>() * 2});
        } else {
          node = value();
        }
        break;
      case 5: {  // the same place in another table
        const ojson& other = tables_[(which + 1 + rng_() % (tables_.size() - 1)) % tables_.size()];
        if (other.contains(p)) node = other.at(p);
        break;
      }
      default: {  // swap with a sibling
        if (parent.size() < 2) break;
        std::vector<Pointer> sib;
        for (const Pointer& q : ps)
          if (q.parent_pointer() == p.parent_pointer() && q != p) sib.push_back(q);
        std::swap(node, t.at(pick(sib)));
        break;
      }
    }
  }

  void text_edit(std::string& text) {
    const size_t at = rng_() % (text.size() + 1);
    switch (rng_() % 3) {
      case 0:
        text.insert(at, 1, "{}[]\",:0-e\\"[rng_() % 11]);
        break;
      case 1:
        if (at < text.size()) text.erase(at, 1);
        break;
      default:
        text.resize(at);
        break;
    }
  }

  std::vector<ojson> tables_;
  std::mt19937 rng_;
  std::vector<std::string> strings_, keys_;
  std::vector<ojson> values_;
};

}  // namespace

TEST_CASE("mutated mapping tables load or fail with loom::Error naming the table, never crash") {
  using namespace loom;
  using Clock = std::chrono::steady_clock;
  const auto& cases = fuzz::table_cases();
  std::vector<ojson> tables;
  for (const fuzz::TableCase& c : cases) {
    const std::string text = slurp(std::string(LOOM_SOURCE_DIR) + "/models/" + c.table);
    tables.push_back(ojson::parse(text));
    // Unmutated, every table loads on its checkpoint.
    CHECK_NOTHROW(fuzz::table_input(reinterpret_cast<const uint8_t*>(text.data()), text.size(),
                                    c.checkpoint));
  }
  const uint32_t seed =
      std::getenv("LOOM_TABLE_FUZZ_SEED")
          ? uint32_t(std::strtoul(std::getenv("LOOM_TABLE_FUZZ_SEED"), nullptr, 10))
          : 20241124u;
  const int trials = std::getenv("LOOM_TABLE_FUZZ_TRIALS")
                         ? std::atoi(std::getenv("LOOM_TABLE_FUZZ_TRIALS"))
                         : 600;
  TableMutator mutator(tables, seed);
  const auto t0 = Clock::now();
  int loaded = 0, rejected = 0, stepped = 0;
  std::map<std::string, int> first_words;  // what the rejections were about, for the log
  for (int k = 0; k < trials; k++) {
    const size_t which = size_t(k) % cases.size();
    const std::string text = mutator.mutate(which);
    CAPTURE(k);
    CAPTURE(text);
    try {
      LoadedModel m = fuzz::table_input(reinterpret_cast<const uint8_t*>(text.data()), text.size(),
                                        cases[which].checkpoint);
      loaded++;
      // What the loader accepts, the CPU backend takes and runs (a one-step prefill), unless
      // the mutation made a frame too large for a quick step.
      auto cpu = make_cpu_backend();
      cpu->load(m.spec, m.weights);
      if (m.spec.frame_slots() + 1 <= 32) {
        const std::vector<float> logits = test::run_feature_step(*cpu, m.spec, nullptr);
        CHECK(logits.size() == size_t(m.spec.vocab));
        stepped++;
      }
    } catch (const Error& e) {
      rejected++;
      const std::string msg = e.what();
      first_words[msg.substr(0, msg.find(':'))]++;
    } catch (const std::exception& e) {
      const std::string what =
          std::string("escaped as ") + typeid(e).name() + " (not loom::Error): " + e.what();
      FAIL_CHECK(what);
    }
  }
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  MESSAGE(trials, " mutated tables (seed ", seed, "): ", loaded, " loaded (", stepped,
          " stepped on the cpu backend), ", rejected, " rejected naming the table; ", s, " s");
  CHECK(loaded + rejected == trials);
  CHECK(loaded >= trials / 20);   // the mutations reach the loader and the backend ...
  CHECK(rejected >= trials / 2);  // ... and mostly break the table
}

TEST_CASE(
    "what the table fuzzing found: wrong-typed ties, load errors that did not name the table") {
  using namespace loom;
  const std::string text = slurp(std::string(LOOM_SOURCE_DIR) + "/models/llama.json");
  auto load_with = [&](const std::function<void(ojson&)>& edit) -> std::string {
    ojson t = ojson::parse(text);
    edit(t);
    const std::string s = t.dump();
    try {
      fuzz::table_input(reinterpret_cast<const uint8_t*>(s.data()), s.size(), "tiny_llama");
    } catch (const Error& e) {
      return e.what();
    }
    return "(loaded)";
  };
  auto lm_head = [](ojson& t) -> ojson& { return t["weights"].back(); };
  // A tie written with the wrong JSON type was an nlohmann::type_error, not a loom::Error.
  CHECK(load_with([&](ojson& t) {
          lm_head(t)["tied_to"] = false;
        }).find("fuzz_table.json: role lm_head: tied_to must be a role name, found false") !=
        std::string::npos);
  CHECK(load_with([&](ojson& t) {
          lm_head(t)["tied_when"] = ojson::array({"x"});
        }).find("role lm_head: tied_when must be a spec field name, found [\"x\"]") !=
        std::string::npos);
  CHECK(load_with([&](ojson& t) {
          lm_head(t)["tie_if_absent"] = ojson::object();
        }).find("role lm_head: tie_if_absent must be true or false, found {}") !=
        std::string::npos);
  // Config and tensor errors named config.json or the checkpoint only; now also the table.
  const std::string table = fuzz::table_path();
  CHECK(load_with([](ojson& t) {
          t["config"]["hidden"] = ojson{{"default", 0}};
        }) == std::string(LOOM_TESTDATA) +
                  "/tiny_llama/config.json: spec field hidden (set by fuzz_table.json to 0) is "
                  "0; it must be positive");
  // A field the table maps no key to is the table's fault, and the message says so.
  CHECK(load_with([](ojson& t) { t["config"].erase("vocab"); }) ==
        std::string(LOOM_TESTDATA) +
            "/tiny_llama/config.json: spec field vocab (fuzz_table.json maps no config key to "
            "it: add \"vocab\" to its \"config\") is 0; it must be positive");
  CHECK(load_with([](ojson& t) { t["weights"][0]["name"] = "embed.weight"; }) ==
        "missing tensor embed.weight (role embed) in " + std::string(LOOM_TESTDATA) +
            "/tiny_llama (mapping table " + table + ")");
  // A message that names the table already is left as it was.
  CHECK(load_with([](ojson& t) {
          t["weights"][0]["shape"] = ojson::array({"hidden", "vocab"});
        }).find("(mapping table") == std::string::npos);
}

TEST_CASE("fuzz/corpus/tables: every seed table loads on a tiny checkpoint") {
  namespace fs = std::filesystem;
  int seeds = 0;
  for (const auto& e : fs::directory_iterator(fs::path(LOOM_SOURCE_DIR) / "fuzz/corpus/tables")) {
    const std::string text = slurp(e.path().string());
    CAPTURE(e.path().string());
    CHECK_NOTHROW(
        loom::fuzz::tables_input(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
    seeds++;
  }
  CHECK(seeds == int(loom::fuzz::table_cases().size()));
}
