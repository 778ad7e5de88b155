// Results side file (sidecar.h).
#include "io/sidecar.h"

#include <cstring>
#include <fstream>

#include "core/error.h"
#include "core/version.h"
#include "io/outputs.h"
#include "io/provenance.h"

namespace loom {
using nlohmann::json;
using nlohmann::ordered_json;

namespace {

constexpr int kSchema = 2;  // identity_agrees: what schema 1 did not record

json read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in.is_open()) return json();
  return json::parse(in, nullptr, false);
}

// Whether `side` lacks `key` because its schema predates it (schema 1, loom 0.5.0 and before:
// no weights_sample, sampling defaults or dataset options).
bool unrecorded(const json& side, const std::string& key) {
  static const char* const kSchema2[] = {"weights_sample", "seed",  "temperature",
                                         "top_k",          "top_p", "dataset_actions",
                                         "dataset_context"};
  if (side.value("schema", 1) >= 2 || side["identity"].contains(key)) return false;
  for (const char* k : kSchema2)
    if (key == k) return true;
  return false;
}

}  // namespace

bool identity_agrees(const json& a, const json& b, const std::string& key) {
  // The KV element each run had, recorded or not (a loom before 0.6.1 recorded fp8 only).
  if (key == "kv_dtype")
    return identity_text(a, a["identity"], key) == identity_text(b, b["identity"], key);
  if (unrecorded(a, key) || unrecorded(b, key)) return true;
  const json& x = a["identity"];
  const json& y = b["identity"];
  if (!x.contains(key) || !y.contains(key)) return !x.contains(key) && !y.contains(key);
  // A folder is the same folder however it was spelled (an older loom wrote it as typed), or
  // where it moved to with its results file (the same place relative to it).
  if (key == "tokens_out" && x[key].is_string() && y[key].is_string()) {
    const std::string p = x[key], q = y[key];
    const bool placed = a.contains("results") && b.contains("results") &&
                        a["results"].is_string() && b["results"].is_string();
    // Results that moved (or a copy of them): the folder must have moved with them.
    if (placed && !p.empty() && !q.empty() && a["results"] != b["results"])
      return relative_to(p, parent_dir(a["results"])) == relative_to(q, parent_dir(b["results"]));
    return same_path(p, q);
  }
  return x[key] == y[key];
}

std::string identity_text(const json& record, const json& identity, const std::string& key) {
  if (!identity.is_object()) return "";
  if (identity.contains(key)) return identity[key].dump();
  if (key != "kv_dtype") return "";
  const json::json_pointer kv("/provenance/dtype/kv");
  if (record.is_object() && record.contains(kv) && record[kv].is_string()) return record[kv].dump();
  return identity.contains("dtype") ? identity["dtype"].dump() : "";
}

std::string sidecar_path(const std::string& out_path) {
  return out_path + ".loom.json";
}

void check_sidecar(const std::string& path, const std::string& out_path,
                   const ordered_json& identity, const std::string& kv_dtype) {
  std::ifstream probe(path);
  if (!probe.is_open()) {
    LOOM_CHECK(!nonempty_file(out_path), "--resume: ", out_path, " holds records but ", path,
               " is missing, so loom cannot tell which model and options made them; resume "
               "needs both files (or pass --overwrite, or write to a new --out)");
    return;
  }
  const json stored = read_json(path);
  LOOM_CHECK(stored.is_object() && stored.contains("identity") && stored["identity"].is_object(),
             "--resume: ", path,
             " is not a loom results side file (expected a JSON object with "
             "\"identity\"); restore it, or pass --overwrite");
  // This run as a side file (its provenance is not set yet: the KV dtype for messages).
  const json now = {{"schema", kSchema},
                    {"identity", identity},
                    {"results", same_path_form(out_path).string()},
                    {"provenance", {{"dtype", {{"kv", kv_dtype}}}}}};
  const json& old = stored["identity"];
  for (auto it = old.begin(); it != old.end(); ++it) {  // a key this run no longer sets
    if (identity.contains(it.key())) continue;
    const std::string has = identity_text(now, now["identity"], it.key());
    fail("--resume: ", out_path, " was made with ", it.key(), " = ", it.value().dump(),
         ", this run has ", has.empty() ? "none" : cat(it.key(), " = ", has), " (", path,
         "); resume with the same model and options, or write to a new --out");
  }
  for (auto it = identity.begin(); it != identity.end(); ++it) {
    if (!identity_agrees(stored, now, it.key())) {
      const std::string was = identity_text(stored, old, it.key());
      fail("--resume: ", out_path, " was made with ", it.key(), " = ",
           was.empty() ? json("(absent)").dump() : was, ", this run has ", it.key(), " = ",
           json(it.value()).dump(), " (", path,
           "); resume with the same model and options, or write to a new --out");
    }
  }
}

void write_sidecar(const std::string& path, const ordered_json& identity, const std::string& state,
                   const ordered_json& extra) {
  ordered_json j;
  j["schema"] = kSchema;
  j["loom_version"] = kLoomVersion;
  j["identity"] = identity;
  j["state"] = state;
  j["updated_utc"] = utc_now_iso();
  j["host"] = host_name();
  // The results file it describes (where it was when written): tokens_out is compared
  // relative to it, so a folder holding both can move.
  constexpr const char* kSuffix = ".loom.json";
  if (path.size() > strlen(kSuffix))
    j["results"] = same_path_form(path.substr(0, path.size() - strlen(kSuffix))).string();
  if (!run_provenance().is_null()) j["provenance"] = run_provenance();
  for (auto it = extra.begin(); it != extra.end(); ++it) j[it.key()] = it.value();
  write_file_atomic(path, j.dump(2) + "\n");
}

json read_sidecar(const std::string& path) {
  std::ifstream probe(path);
  if (!probe.is_open()) return json();
  json j = read_json(path);
  LOOM_CHECK(j.is_object() && j.contains("identity") && j["identity"].is_object(), path,
             " is not a loom results side file (expected a JSON object with \"identity\")");
  return j;
}

std::string sidecar_state(const std::string& path) {
  const json j = read_json(path);
  return j.is_object() && j.contains("state") && j["state"].is_string()
             ? j["state"].get<std::string>()
             : "";
}

}  // namespace loom
