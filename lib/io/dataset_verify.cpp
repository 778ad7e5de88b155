// `loom verify DIR` (dataset.h verify_dataset) and the reading of data files that `--resume`
// shares with it (dataset_file.h). Verification changes nothing: it reads every index, every
// data file's header and every data byte (for its SHA-256), and lists what disagrees.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <thread>

#include "core/error.h"
#include "core/sha256.h"
#include "io/dataset.h"
#include "io/dataset_file.h"
#include "io/job_ids.h"
#include "io/sidecar.h"

namespace loom {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

bool read_at(int fd, void* buf, size_t n, uint64_t off) {
  return ::pread(fd, buf, n, off_t(off)) == ssize_t(n);
}

// One index of the folder: the merged dataset.json + manifest.jsonl, or a shard's pair.
struct Index {
  std::string info_name, manifest_name;
  json info;
};

// A data file as the manifests name it: the entries, in order, and where the first one is.
struct Named {
  std::vector<json> entries;
  std::string where;           // "manifest.jsonl line 4"
  const json* info = nullptr;  // its index (dataset.json), for the file's form
  std::string info_name;
  std::vector<std::string> problems;  // filled by the checking thread
  uint64_t bytes = 0;
  bool checksummed = false;
};

const std::regex kDataName(R"(data-\d+(\.shard-\d+-of-\d+)?\.safetensors)");
const std::regex kSumsName(R"(SHA256SUMS(\.shard-\d+-of-\d+)?)");
const std::regex kShardInfo(R"(dataset\.shard-(\d+)-of-(\d+)\.json)");

// The indexes of `dir`: dataset.json when there is one (a merged index lists every shard's
// files), else every dataset.shard-K-of-N.json.
std::vector<Index> find_indexes(const std::string& dir, DatasetVerify& v) {
  std::vector<Index> out;
  std::error_code ec;
  if (fs::exists(dir + "/dataset.json", ec)) return {{"dataset.json", "manifest.jsonl", {}}};
  std::map<std::pair<int, int>, Index> shards;  // (N, K) → index
  for (const auto& de : fs::directory_iterator(dir, ec)) {
    const std::string n = de.path().filename().string();
    std::smatch m;
    if (!std::regex_match(n, m, kShardInfo)) continue;
    const int k = std::stoi(m[1]), count = std::stoi(m[2]);
    shards[{count, k}] = {n, cat("manifest.shard-", k, "-of-", count, ".jsonl"), {}};
  }
  std::set<int> counts;
  for (auto& [nk, index] : shards) {
    counts.insert(nk.first);
    out.push_back(std::move(index));
  }
  if (counts.size() > 1)
    v.problems.push_back(cat("shards of ", counts.size(), " different counts (", *counts.begin(),
                             " and ", *counts.rbegin(),
                             "): the indexes of two runs; remove the stale one's files"));
  if (counts.size() == 1) {
    const int count = *counts.begin();
    for (int k = 0; k < count; ++k)
      if (!shards.count({count, k}))
        v.problems.push_back(cat("dataset.shard-", k, "-of-", count, ".json: missing (shard ", k,
                                 "/", count, " never ran here)"));
  }
  return out;
}

// The manifest lines of `path`, each as a parsed object (compared by value).
std::multiset<std::string> manifest_lines(const std::string& path) {
  std::multiset<std::string> out;
  std::ifstream in(path, std::ios::binary);
  for (std::string text; std::getline(in, text);) {
    const json e = json::parse(text, nullptr, false);
    out.insert(e.is_discarded() ? text : e.dump());
  }
  return out;
}

// A merged index lists what its shards' indexes list: each shard's dataset.json complete, and
// manifest.jsonl holding exactly their lines (a shard changed after the merge shows here).
void check_shards_of_merge(const std::string& dir, DatasetVerify& v) {
  std::multiset<std::string> shards;
  std::error_code ec;
  for (const auto& de : fs::directory_iterator(dir, ec)) {
    const std::string n = de.path().filename().string();
    std::smatch m;
    if (!std::regex_match(n, m, kShardInfo)) continue;
    std::ifstream in(de.path());
    const json info = json::parse(in, nullptr, false);
    if (!info.is_object() || !info.contains("state") || info["state"] != "complete")
      v.problems.push_back(cat(n, ": not \"complete\", but the merged dataset.json lists it"));
    const std::string manifest = cat("manifest.shard-", m[1].str(), "-of-", m[2].str(), ".jsonl");
    const std::multiset<std::string> lines = manifest_lines(dir + "/" + manifest);
    shards.insert(lines.begin(), lines.end());
  }
  if (manifest_lines(dir + "/manifest.jsonl") != shards)
    v.problems.push_back(
        "manifest.jsonl: not the lines of the shards' manifests (a shard changed after `loom "
        "merge --dataset`: merge again)");
}

// Reads one index and its manifest into `named`; problems into v.
void read_index(const std::string& dir, Index& ix, std::map<std::string, Named>& named,
                std::map<std::pair<std::string, uint64_t>, std::string>& samples,
                DatasetVerify& v) {
  std::ifstream in(dir + "/" + ix.info_name, std::ios::binary);
  ix.info = json::parse(in, nullptr, false);
  if (!in.is_open() || ix.info.is_discarded() || !ix.info.is_object() ||
      ix.info.value("format", "") != "loom-dataset") {
    v.problems.push_back(
        cat(ix.info_name, ": not a loom dataset.json (\"format\": \"loom-dataset\")"));
    return;
  }
  v.indexes.push_back(ix.info_name);
  const std::string state = ix.info.value("state", "");
  if (ix.info.value("manifest", ix.manifest_name) != ix.manifest_name)
    v.problems.push_back(cat(ix.info_name, ": its manifest is ", ix.info["manifest"].dump(),
                             ", expected \"", ix.manifest_name, "\""));
  if (state != "complete")
    v.problems.push_back(cat(ix.info_name, ": state \"", state,
                             "\", not \"complete\": a run is writing it, or stopped or failed "
                             "(finish it with loom run --resume), or a merge left shards out"));

  std::ifstream mf(dir + "/" + ix.manifest_name, std::ios::binary);
  if (!mf.is_open()) {
    if (!empty_totals(ix.info))  // else an empty shard of loom 0.5.0, which made no manifest
      v.problems.push_back(cat(ix.manifest_name, ": missing (named by ", ix.info_name, ")"));
    return;
  }
  int64_t files = 0, count = 0, rows = 0, line = 0;
  std::set<std::string> files_here;
  for (std::string text; std::getline(mf, text);) {
    ++line;
    const std::string where = cat(ix.manifest_name, " line ", line);
    json e = json::parse(text, nullptr, false);
    if (e.is_discarded() || !e.is_object() || !e.contains("id") ||
        !e["sample"].is_number_unsigned() || !e["file"].is_string() || !e["rows"].is_array() ||
        e["rows"].size() != 2 || !e["rows"][0].is_number_integer() ||
        !e["rows"][1].is_number_integer()) {
      v.problems.push_back(cat(where, ": not a manifest entry (id, sample, file, rows)"));
      continue;
    }
    const auto key = std::make_pair(id_text(e["id"]), e["sample"].get<uint64_t>());
    // A sample twice is said once; its line still counts for its own index and file.
    auto [it, fresh] = samples.emplace(key, where);
    if (!fresh)
      v.problems.push_back(cat(where, ": job ", key.first, " sample ", key.second,
                               " again (first in ", it->second, ")"));
    ++count;
    rows += e["rows"][1].get<int64_t>() - e["rows"][0].get<int64_t>();
    const std::string file = e["file"];
    if (files_here.insert(file).second) ++files;
    Named& n = named[file];
    if (n.entries.empty()) {
      n.where = where;
      n.info = &ix.info;
      n.info_name = ix.info_name;
    }
    n.entries.push_back(std::move(e));
  }
  v.samples += count;
  v.rows += rows;
  const json totals = ix.info.value("totals", json::object());
  const json want = {{"files", files}, {"samples", count}, {"rows", rows}};
  for (const char* k : {"files", "samples", "rows"})
    if (totals.value(k, int64_t(-1)) != want[k].get<int64_t>())
      v.problems.push_back(cat(ix.info_name, ": totals.", k, " is ", totals.value(k, json()).dump(),
                               ", its manifest ", ix.manifest_name, " has ",
                               want[k].get<int64_t>()));
}

// The KV dtype changes tokens, as the draw stream does: the one a data file's provenance names
// (its "provenance" metadata, JSON text) against its index's provenance.dtype.kv and
// run_identity.kv_dtype (the KV dtype where it is not the compute dtype, else absent; loom
// 0.6.0 and before recorded fp8 only, so absent is taken for any other). Nothing where the file or
// the index records none (a loom before either).
std::vector<std::string> kv_dtype_problems(const std::string& name, const json& meta,
                                           const json& info, const std::string& info_name) {
  std::vector<std::string> out;
  const json::json_pointer kv("/dtype/kv");
  const json prov = json::parse(meta.value("provenance", ""), nullptr, false);
  if (!prov.is_object() || !prov.contains(kv) || !prov[kv].is_string()) return out;
  const json& file_kv = prov[kv];
  if (info.contains("provenance") && info["provenance"].contains(kv) &&
      info["provenance"][kv] != file_kv)
    out.push_back(cat(name, ": its KV dtype is ", file_kv.dump(), ", ", info_name,
                      "'s provenance.dtype.kv is ", info["provenance"][kv].dump()));
  if (info.contains("run_identity") && info["run_identity"].is_object()) {
    const json& id = info["run_identity"];
    const json has = id.contains("kv_dtype") ? id["kv_dtype"] : json();
    if (has.is_null() ? file_kv == "fp8" : has != file_kv)
      out.push_back(cat(name, ": its KV dtype is ", file_kv.dump(), ", ", info_name,
                        "'s run_identity.kv_dtype is ", has.is_null() ? "absent" : has.dump(),
                        " (expected the file's, or absent where the cache took the compute "
                        "dtype)"));
  }
  return out;
}

// What the file's own header says against what its index says of every file: the readers of a
// dataset take P, A, the action width and which tensors exist from dataset.json.
std::vector<std::string> form_problems(const std::string& name, const json& header,
                                       const json& info, const std::string& info_name) {
  std::vector<std::string> out;
  auto differs = [&](const std::string& what, const json& file, const json& index) {
    if (file != index)
      out.push_back(
          cat(name, ": its ", what, " is ", file.dump(), ", ", info_name, " says ", index.dump()));
  };
  const json& meta = header.at("__metadata__");
  differs("schema", meta.value("schema", ""), std::to_string(info.value("schema", 0)));
  differs("model", meta.value("model", ""), info.at("model").value("name", ""));
  differs("draw_stream", meta.value("draw_stream", ""),
          std::to_string(info.value("draw_stream", 0)));
  for (std::string& p : kv_dtype_problems(name, meta, info, info_name)) out.push_back(std::move(p));
  if (!info.at("shard").contains("merged_from"))
    differs("shard", meta.value("shard", ""),
            cat(info.at("shard").value("index", 0), "/", info.at("shard").value("count", 0)));
  const bool frames = info.at("frames").get<bool>();
  const json& tokens = header.at("tokens").at("shape");
  differs("tokens' rank", tokens.size(), frames ? 2 : 1);
  if (frames && tokens.size() == 2)
    differs("tokens per frame", tokens[1], info.at("tokens_per_frame"));
  const json& stores = info.at("stores");
  const bool ids = header.contains("action_ids");
  differs("action rows", header.contains("actions") || ids, stores.value("actions", false));
  differs("context", header.contains("context"), stores.value("context", false));
  if (frames && (header.contains("actions") || ids)) {
    const json& a = header.at(ids ? "action_ids" : "actions").at("shape");
    json want = {tokens[0], info.at("action_tokens")};
    if (!ids) want.push_back(info.at("action_dim"));
    differs(ids ? "action_ids shape" : "actions shape", a, want);
  }
  return out;
}

// The int32 ids of a tensor's bytes [begin, end) in a data file, fed the file's pieces in order
// (sha256_file's), against [0, vocab): what a bit flip in a file without a checksum, or a
// writer's bug, would leave. `problem`: the first id outside, "" while none.
struct IdCheck {
  std::string what;  // "data-000001.safetensors: tokens"
  uint64_t begin = 0, end = 0;
  int64_t vocab = 0;
  std::string problem;
  uint8_t part[4] = {};  // an id split between two pieces
  int have = 0;

  void feed(uint64_t offset, const char* bytes, size_t n) {
    for (uint64_t at = std::max(offset, begin);
         at < std::min(offset + n, end) && problem.empty();) {
      int32_t id = 0;
      if (have == 0 && std::min(offset + n, end) - at >= 4) {
        std::memcpy(&id, bytes + (at - offset), 4);
        at += 4;
      } else {
        part[have++] = uint8_t(bytes[at++ - offset]);
        if (have < 4) continue;
        std::memcpy(&id, part, 4);
        have = 0;
      }
      if (id < 0 || id >= vocab)
        problem = cat(what, " element ", (at - begin) / 4 - 1, " is ", id,
                      ", outside the vocabulary [0, ", vocab, ")");
    }
  }
};

// Checks one named data file (run on a worker thread).
void check_file(const std::string& dir, const std::string& name, Named& n,
                const std::map<std::string, std::string>& sums, bool have_sums) {
  const std::string path = dir + "/" + name;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    n.problems.push_back(cat(name, ": missing (named by ", n.where, ")"));
    return;
  }
  n.bytes = fs::file_size(path, ec);
  DataFileInfo f = read_data_file(path, name);
  if (!f.problem.empty()) n.problems.push_back(cat(name, ": ", f.problem));
  const json& model = n.info->value("model", json::object());
  const std::string want = model.is_object() ? model.value("config_hash", "") : "";
  if (!f.config_hash.empty() && f.config_hash != want)
    n.problems.push_back(
        cat(name, ": made by model ", f.model, " (", f.config_hash, "), its index names ", want));
  if (f.problem.empty() && n.info) {
    try {
      for (std::string& p : form_problems(name, f.header, *n.info, n.info_name))
        n.problems.push_back(std::move(p));
    } catch (const json::exception&) {
      n.problems.push_back(cat(name, ": ", n.info_name,
                               " or its header lacks a field of the "
                               "dataset's form (frames, tokens_per_frame, stores, ...)"));
    }
  }
  // The ids of the token tensors, checked in the same read as the file's SHA-256.
  std::vector<IdCheck> ids;
  const int64_t vocab = n.info->value("vocab_size", int64_t(0));
  for (const char* tensor : {"tokens", "context"})
    if (f.problem.empty() && vocab > 0 && f.header.contains(tensor) &&
        f.header[tensor].value("dtype", "") == "I32") {
      const json& off = f.header[tensor]["data_offsets"];
      IdCheck c;
      c.what = cat(name, ": ", tensor);
      c.begin = f.data_start + off.at(0).get<uint64_t>();
      c.end = f.data_start + off.at(1).get<uint64_t>();
      c.vocab = vocab;
      ids.push_back(std::move(c));
    }
  if (f.problem.empty()) {
    size_t i = 0;  // the first sample where the file and the manifest disagree
    while (i < f.entries.size() && i < n.entries.size() && f.entries[i] == n.entries[i]) ++i;
    if (i < f.entries.size() || i < n.entries.size())
      n.problems.push_back(cat(name, ": holds ", f.entries.size(), " samples, the manifest lists ",
                               n.entries.size(), " in it (from ", n.where, "); they differ at its ",
                               "sample ", i, ": an index that is not this file's"));
  }
  if (!have_sums && ids.empty()) return;
  const std::string got = sha256_file(path, [&](uint64_t offset, const char* bytes, size_t k) {
    for (IdCheck& c : ids) c.feed(offset, bytes, k);
  });
  for (IdCheck& c : ids)
    if (!c.problem.empty()) n.problems.push_back(std::move(c.problem));
  if (!have_sums) return;
  auto it = sums.find(name);
  if (it == sums.end()) {
    n.problems.push_back(cat(name, ": no checksum in any SHA256SUMS file"));
    return;
  }
  if (got != it->second)
    n.problems.push_back(cat(name, ": SHA-256 ", got, ", SHA256SUMS says ", it->second,
                             ": its bytes changed after loom wrote it"));
  else
    n.checksummed = true;
}

}  // namespace

DataFileInfo read_data_file(const std::string& path, const std::string& name) {
  DataFileInfo out;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    out.problem = cat("cannot open it (", std::strerror(errno), ")");
    return out;
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  std::string& problem = out.problem;
  struct stat sb {};
  uint64_t hlen = 0;
  if (::fstat(fd, &sb) != 0 || !read_at(fd, &hlen, 8, 0))
    return problem = "shorter than its header", out;
  const uint64_t size = uint64_t(sb.st_size);
  if (hlen > size - 8 || hlen > (uint64_t(1) << 30))
    return problem = "its header length is past the end", out;
  std::string text(hlen, '\0');
  if (!read_at(fd, text.data(), hlen, 8)) return problem = "cannot read its header", out;
  out.data_start = 8 + hlen;
  json& header = out.header;
  header = json::parse(text, nullptr, false);
  if (header.is_discarded() || !header.is_object()) return problem = "its header is not JSON", out;
  try {
    const json meta = header.value("__metadata__", json::object());
    if (meta.value("format", "") != "loom-dataset") return problem = "not a loom dataset file", out;
    out.model = meta.value("model", "?");
    out.config_hash = meta.value("config_hash", "?");
    uint64_t end = 0;
    for (auto it = header.begin(); it != header.end(); ++it) {
      if (it.key() == "__metadata__") continue;
      end = std::max<uint64_t>(end, it.value().at("data_offsets").at(1).get<uint64_t>());
    }
    if (size != 8 + hlen + end)
      return problem = cat(size < 8 + hlen + end ? "truncated: " : "bytes after its data: ", size,
                           " bytes, its header says ", 8 + hlen + end),
             out;
    const json manifest = json::parse(meta.value("manifest", "[]"), nullptr, false);
    const json& off = header.at("sample_offsets");
    if (manifest.is_discarded() || !manifest.is_array() ||
        off.at("shape").at(0).get<uint64_t>() != manifest.size() + 1)
      return problem = "its manifest and sample_offsets disagree", out;
    std::vector<int64_t> o(manifest.size() + 1);
    if (!read_at(fd, o.data(), 8 * o.size(),
                 8 + hlen + off.at("data_offsets").at(0).get<uint64_t>()))
      return problem = "cannot read sample_offsets", out;
    for (size_t i = 0; i < manifest.size(); ++i) {
      const json& rows = manifest[i].at("rows");
      if (manifest[i].value("file", "") != name || rows.at(0).get<int64_t>() != o[i] ||
          rows.at(1).get<int64_t>() != o[i + 1]) {
        out.entries.clear();
        return problem = cat("its manifest entry ", i, " disagrees with sample_offsets"), out;
      }
      out.entries.push_back(manifest[i]);
    }
  } catch (const json::exception&) {
    out.entries.clear();
    problem = "its header is not a loom dataset header (a field of the wrong type)";
  }
  return out;
}

Sums read_sums(const std::string& path) {
  Sums out;
  std::ifstream in(path, std::ios::binary);
  int64_t line = 0;
  for (std::string text; std::getline(in, text);) {
    ++line;
    if (!text.empty() && text.back() == '\r') text.pop_back();
    const bool hex = text.size() > 66 && std::all_of(text.begin(), text.begin() + 64, ::isxdigit);
    if (!hex || text[64] != ' ') {
      out.problems.push_back(cat("line ", line, ": expected \"<64 hex digits>  <file name>\""));
      continue;
    }
    const size_t at = text[65] == ' ' || text[65] == '*' ? 66 : 65;
    std::string digits = text.substr(0, 64), name = text.substr(at);
    std::transform(digits.begin(), digits.end(), digits.begin(), ::tolower);
    if (name.rfind("./", 0) == 0) name = name.substr(2);  // as sha256sum -c takes it
    out.sums[name] = digits;
  }
  return out;
}

bool empty_totals(const json& info) {
  const json t = info.value("totals", json::object());
  if (!t.is_object()) return false;
  for (const char* k : {"files", "samples", "rows"})
    if (!t.contains(k) || t[k] != 0) return false;
  return true;
}

std::string shards_differ(const json& a, const json& b) {
  if (!a.is_object() || !b.is_object()) return "";
  const json::json_pointer jobs("/jobs_read"), run("/run_identity");
  if (a.contains(jobs) && b.contains(jobs) && a[jobs] != b[jobs])
    return cat("they read other job lines (jobs_read ", a[jobs].dump(), " and ", b[jobs].dump(),
               "): a pipe the shards shared, or lines appended between their runs; --resume "
               "each shard on one jobs file");
  if (a.contains(run) && b.contains(run) && a[run].is_object() && b[run].is_object()) {
    json keys = a[run];
    keys.update(b[run]);
    keys["kv_dtype"] = nullptr;  // recorded or not: the provenance says it (identity_text)
    for (auto it = keys.begin(); it != keys.end(); ++it) {
      const auto value = [&](const json& j) {
        const std::string text = identity_text(j, j[run], it.key());
        return text.empty() ? std::string("(absent)") : text;
      };
      // kv_dtype: the element each run had, recorded or not (identity_agrees).
      const bool presence =
          it.key() != "kv_dtype" && a[run].contains(it.key()) != b[run].contains(it.key());
      if (presence || value(a) != value(b))
        return cat("their runs differ in ", it.key(), ": ", value(a), " and ", value(b),
                   " (run_identity: what changes tokens)");
    }
  }
  for (const char* key : {"/model/config_hash", "/draw_stream", "/frames", "/tokens_per_frame",
                          "/action_tokens", "/action_dim", "/vocab_size", "/stores"}) {
    const json::json_pointer p(key);
    if (a.contains(p) && b.contains(p) && a[p] != b[p])
      return cat(std::string(key).substr(1), " ", a[p].dump(), " and ", b[p].dump());
  }
  return "";
}

DatasetVerify verify_dataset(const std::string& dir, int threads) {
  std::error_code ec;
  LOOM_CHECK(fs::is_directory(dir, ec), "verify ", dir, ": expected a --tokens-out folder, found ",
             fs::exists(dir, ec) ? "a file" : "nothing");
  DatasetVerify v;
  std::vector<Index> indexes = find_indexes(dir, v);
  LOOM_CHECK(!indexes.empty(), "verify ", dir,
             ": no dataset.json or dataset.shard-K-of-N.json; expected a --tokens-out folder");
  std::map<std::string, Named> named;
  std::map<std::pair<std::string, uint64_t>, std::string> samples;
  for (Index& ix : indexes) {
    try {
      read_index(dir, ix, named, samples, v);
    } catch (const json::exception& e) {
      v.problems.push_back(cat(ix.info_name, ": a field of the wrong type (", e.what(), ")"));
    }
  }
  v.files = int64_t(named.size());
  for (const Index& ix : indexes) {
    const std::string why = shards_differ(ix.info, indexes[0].info);
    if (!why.empty())
      v.problems.push_back(
          cat(ix.info_name, " and ", indexes[0].info_name, " are not shards of one run: ", why));
  }
  const json& info = indexes[0].info;
  const bool merged = indexes[0].info_name == "dataset.json" && info.is_object() &&
                      info.contains("shard") && info["shard"].is_object() &&
                      info["shard"].contains("merged_from");
  if (merged) check_shards_of_merge(dir, v);
  if (indexes[0].info_name == "dataset.json" && !merged)
    for (const auto& de : fs::directory_iterator(dir, ec))
      if (std::regex_match(de.path().filename().string(), kShardInfo))
        v.problems.push_back(cat(de.path().filename().string(),
                                 ": a shard's index beside an unsharded dataset.json (the two "
                                 "layouts of two runs; remove the stale one's files)"));

  // What else the folder holds: data files no index lists, stale temporary files, checksums.
  std::map<std::string, std::string> sums;
  bool have_sums = false;
  std::vector<std::string> on_disk;
  for (const auto& de : fs::directory_iterator(dir, ec)) {
    const std::string n = de.path().filename().string();
    if (std::regex_match(n, kDataName)) on_disk.push_back(n);
    if (n.find(".tmp-") != std::string::npos)
      v.problems.push_back(
          cat(n, ": a temporary file (of a run or merge writing now, or left by one that was ",
              "killed: loom run --resume removes a shard's, loom merge --dataset the merged ",
              "index's)"));
    if (!std::regex_match(n, kSumsName)) continue;
    have_sums = true;
    const Sums read = read_sums(de.path().string());
    for (const std::string& p : read.problems) v.problems.push_back(cat(n, " ", p));
    for (const auto& [file, hex] : read.sums) {
      auto [it, fresh] = sums.emplace(file, hex);
      if (!fresh && it->second != hex)
        v.problems.push_back(cat(file, ": two different checksums in the SHA256SUMS files"));
    }
  }
  std::sort(on_disk.begin(), on_disk.end());
  for (const std::string& n : on_disk)
    if (!named.count(n))
      v.problems.push_back(cat(n, ": a data file no manifest lists (a stopped run's last file: ",
                               "loom run --resume removes it)"));
  for (const auto& [file, hex] : sums)
    if (!named.count(file))
      v.problems.push_back(cat(file,
                               ": has a SHA256SUMS line but is no data file the index "
                               "lists",
                               fs::exists(dir + "/" + file, ec) ? "" : " (nor in the folder)"));
  if (!have_sums)
    v.notes.push_back(
        "no SHA256SUMS file (a dataset written by loom 0.5.0 or before): data files "
        "checked against the manifest, not their bytes");

  // Every named file, on `threads` workers; problems kept in file order.
  std::vector<std::pair<const std::string, Named>*> work;
  for (auto& kv : named) work.push_back(&kv);
  std::atomic<size_t> next{0};
  std::vector<std::string> errors(size_t(std::max(threads, 1)));
  auto worker = [&](size_t w) {
    try {
      for (size_t i; (i = next++) < work.size();)
        check_file(dir, work[i]->first, work[i]->second, sums, have_sums);
    } catch (const std::exception& e) {
      errors[w] = e.what();
    }
  };
  std::vector<std::thread> pool;
  for (size_t w = 1; w < errors.size(); ++w) pool.emplace_back(worker, w);
  worker(0);
  for (std::thread& t : pool) t.join();
  for (const std::string& e : errors) LOOM_CHECK(e.empty(), "verify ", dir, ": ", e);
  for (const auto* kv : work) {
    const Named& n = kv->second;
    v.problems.insert(v.problems.end(), n.problems.begin(), n.problems.end());
    v.bytes += n.bytes;
    v.checksummed += n.checksummed;
  }
  return v;
}

}  // namespace loom
