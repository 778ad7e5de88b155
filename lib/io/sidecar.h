// The results file's side file `<out>.loom.json` (issue 11 §3): what made the records — the
// model's fingerprint and every option that changes tokens — and the run's state. `--resume`
// compares it field by field with the new run's and refuses a mismatch naming both values, so
// records made by another model, dtype, backend or shard are never continued. `loom merge`
// reads `state` to tell a finished shard from one that was stopped or is still running.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace loom {

// "<out>.loom.json"
std::string sidecar_path(const std::string& out_path);

// Whether two side files (as stored) agree on identity key `key`: equal values, or both absent;
// tokens_out naming one folder however spelled; or a key one of them lacks because its schema
// predates it (schema 1, loom 0.5.0 and before: no weights_sample, sampling defaults or dataset
// options), so runs in progress resume and merge after an upgrade. kv_dtype: the KV element
// each run had (identity_text), recorded or not.
bool identity_agrees(const nlohmann::json& a, const nlohmann::json& b, const std::string& key);

// Key `key` of `identity` (a side file's "identity", a dataset.json's or report's
// "run_identity") as a message shows it: its JSON. Where absent: kv_dtype (an identity holds it
// where it is not the compute dtype; loom 0.6.0 and before: for an FP8 cache only) as the KV
// dtype the run had, from `record`'s provenance.dtype.kv (the
// side file, dataset.json or report), else the identity's compute dtype ("\"f32\""); any other
// key "".
std::string identity_text(const nlohmann::json& record, const nlohmann::json& identity,
                          const std::string& key);

// Fails when `path` exists and one of `identity`'s fields differs from the stored one, or when
// `path` is missing but `out_path` already holds records (they cannot be checked). `kv_dtype`:
// this run's KV element ("f32", "bf16", "fp8"), which messages name where the identity has none.
void check_sidecar(const std::string& path, const std::string& out_path,
                   const nlohmann::ordered_json& identity, const std::string& kv_dtype);

// Writes {"schema", "loom_version", "identity": identity, "state", "updated_utc", "host",
// "provenance" (run_provenance(), when set), ...extra} atomically. state: "running", "complete"
// (every job has its records), "stopped" (SIGINT).
void write_sidecar(const std::string& path, const nlohmann::ordered_json& identity,
                   const std::string& state, const nlohmann::ordered_json& extra = {});

// The stored state, or "" when there is no readable side file.
std::string sidecar_state(const std::string& path);

// The side file as stored; null when there is none, and a loom::Error naming it when it is
// not one (no "identity" object).
nlohmann::json read_sidecar(const std::string& path);

}  // namespace loom
