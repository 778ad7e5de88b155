// Token dataset files, manifest and resume reconciliation (dataset.h).
#include "io/dataset.h"

#include <fcntl.h>
#include <simdjson.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fault.h"
#include "core/philox.h"
#include "core/sha256.h"
#include "core/version.h"
#include "io/jobs.h"
#include "io/outputs.h"
#include "io/provenance.h"

namespace loom {
namespace fs = std::filesystem;
using nlohmann::ordered_json;

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors data is little-endian");

namespace {

// The double whose shortest text is the float's: 0.8f is written 0.8, not 0.800000011920929
// (the float's exact value as a double), so the manifest says what the job said.
double shortest(float v) {
  char buf[32];
  const auto end = std::to_chars(buf, buf + sizeof buf, v).ptr;
  double d = v;
  std::from_chars(buf, end, d);
  return d;
}

constexpr const char* kFormat = "loom-dataset";

std::string shard_tag(const DatasetOptions& o) {
  return o.shard_count > 1 ? cat(".shard-", o.shard_index, "-of-", o.shard_count) : "";
}

std::string data_file_name(const DatasetOptions& o, int64_t seq) {
  char num[32];
  std::snprintf(num, sizeof num, "%06lld", (long long)seq);
  return cat("data-", num, shard_tag(o), ".safetensors");
}

// One sample's manifest line (without the file and rows, which commit() adds).
ordered_json manifest_entry(const JobResult& r, const DatasetModel& m) {
  const Job& job = *r.job;
  ordered_json e;
  e["id"] = id_value(r);
  e["sample"] = r.sample;
  e["line"] = r.line;
  e["file"] = "";
  e["rows"] = {0, 0};
  if (r.has_frames) {
    e["num_frames"] = r.frames.size();
    e["context_frames"] = job.context_frames;
  } else {
    e["num_tokens"] = r.tokens.size();
    e["prompt_tokens"] = job.prompt.size();
  }
  e["seed"] = job.sampling.seed;
  e["sampling"] = {{"temperature", shortest(job.sampling.temperature)},
                   {"top_k", job.sampling.top_k},
                   {"top_p", shortest(job.sampling.top_p)}};
  e["model"] = m.name;
  e["config_hash"] = m.config_hash;
  e["loom_version"] = kLoomVersion;
  return e;
}

struct TensorOut {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::vector<char> bytes;
};

template <class T>
void append(std::vector<char>& out, const T* p, size_t n) {
  const char* c = reinterpret_cast<const char*>(p);
  out.insert(out.end(), c, c + n * sizeof(T));
}

// Action rows [first_row, first_row + frames * A) of the job, NaN where the job gave none.
void append_actions(std::vector<char>& out, const Job& job, const ModelSpec& s, int64_t first_row,
                    int64_t frames) {
  const int64_t rows = frames * s.action_tokens;
  std::vector<float> v(size_t(rows * s.action_dim), std::nanf(""));
  for (int64_t r = 0; r < rows && first_row + r < job.action_rows; ++r) {
    std::memcpy(&v[size_t(r * s.action_dim)], &job.actions[size_t((first_row + r) * s.action_dim)],
                sizeof(float) * size_t(s.action_dim));
  }
  append(out, v.data(), v.size());
}

// Action-token models: the A action ids after each of `frames` frames, from the prompt for
// context frames, else from the job's action_token_ids; -1 where the job gave none (the last
// frame's optional row).
void append_action_ids(std::vector<char>& out, const Job& job, const ModelSpec& s, bool context,
                       int64_t frames) {
  const int64_t A = s.action_tokens, P = s.image_tokens, S = s.frame_slots();
  std::vector<int32_t> v(size_t(frames * A), -1);
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t a = 0; a < A; ++a) {
      if (context)
        v[size_t(f * A + a)] = job.prompt[size_t(f * S + P + a)];
      else if (f < job.action_id_rows)
        v[size_t(f * A + a)] = job.action_ids[size_t(f * A + a)];
    }
  append(out, v.data(), v.size());
}

uint64_t sample_bytes(const JobResult& r, const ModelSpec& s, const DatasetOptions& o) {
  const Job& job = *r.job;
  uint64_t b = 16;  // two offsets
  if (!r.has_frames) return b + 4 * (r.tokens.size() + (o.context ? job.prompt.size() : 0));
  const uint64_t frame = 4ull * uint64_t(s.image_tokens);
  const bool ids = s.action_projection == ActionProjection::Tokens;
  const uint64_t acts =
      o.actions ? 4ull * uint64_t(s.action_tokens) * uint64_t(ids ? 1 : s.action_dim) : 0;
  b += r.frames.size() * (frame + acts);
  if (o.context) b += uint64_t(job.context_frames) * (frame + acts);
  return b;
}

// Appends `text` to `path` (created if missing) and syncs it; throws naming the file as `what`.
void append_synced(const std::string& path, const std::string& text, const char* what) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) fail("cannot write ", what, " ", path, ": ", std::strerror(errno));
  try {
    write_all(fd, text.data(), text.size(), path);
    if (::fsync(fd) != 0) fail("cannot write ", what, " ", path, ": ", std::strerror(errno));
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
}

}  // namespace

std::string dataset_manifest_path(const DatasetOptions& o) {
  return cat(o.dir, "/manifest", shard_tag(o), ".jsonl");
}
std::string dataset_info_path(const DatasetOptions& o) {
  return cat(o.dir, "/dataset", shard_tag(o), ".json");
}
std::string dataset_lock_path(const DatasetOptions& o) {
  return cat(o.dir, "/dataset", shard_tag(o), ".lock");
}
std::string dataset_sums_path(const DatasetOptions& o) {
  return cat(o.dir, "/SHA256SUMS", shard_tag(o));
}

std::string dataset_results_path(const DatasetOptions& o) {
  std::ifstream in(dataset_info_path(o));
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (!j.is_object() || !j.contains("results") || !j["results"].is_string()) return "";
  // Where the results are from where the folder is now: after a move or a copy of both, the
  // results beside it (a copy's dataset is the copy's results', not the original's).
  if (j.contains("results_relative") && j["results_relative"].is_string() && j["results"] != "-")
    return same_path_form(
               (fs::path(same_path_form(o.dir)) / j["results_relative"].get<std::string>())
                   .lexically_normal()
                   .string())
        .string();
  return j["results"].get<std::string>();
}

int64_t data_file_seq(const DatasetOptions& o, const std::string& n) {
  const std::string suffix = shard_tag(o) + ".safetensors";
  if (n.size() <= 5 + suffix.size() || n.compare(0, 5, "data-") != 0 ||
      n.compare(n.size() - suffix.size(), suffix.size(), suffix) != 0)
    return -1;
  const std::string num = n.substr(5, n.size() - 5 - suffix.size());
  if (num.empty() || num.size() > 12 || !std::all_of(num.begin(), num.end(), ::isdigit))
    return -1;  // another shard's file ("000001.shard-0-of-2" has a dot)
  return std::stoll(num);
}

std::vector<std::pair<int64_t, std::string>> dataset_files(const DatasetOptions& o) {
  std::vector<std::pair<int64_t, std::string>> out;
  std::error_code ec;
  for (const auto& de : fs::directory_iterator(o.dir, ec)) {
    const std::string n = de.path().filename().string();
    const int64_t seq = data_file_seq(o, n);
    if (seq >= 0) out.emplace_back(seq, n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

DatasetWriter::DatasetWriter(DatasetOptions opt, DatasetModel model,
                             const DatasetReconcile& resumed)
    : opt_(std::move(opt)),
      model_(std::move(model)),
      seq_(resumed.next_seq),
      files_(resumed.files_kept),
      samples_(resumed.samples_kept),
      rows_(resumed.rows_kept) {}

void DatasetWriter::add(const JobResult& r, double now_s) {
  LOOM_CHECK(r.ok && r.job, "dataset: job ", r.id, " sample ", r.sample, " has no tokens");
  if (pending_.empty()) opened_s_ = now_s;
  pending_.push_back(r);
  pending_bytes_ += sample_bytes(r, model_.spec, opt_);
}

bool DatasetWriter::due(double now_s) const {
  if (pending_.empty()) return false;
  if (opt_.samples_per_file > 0 && int64_t(pending_.size()) >= opt_.samples_per_file) return true;
  if (pending_bytes_ >= kDatasetFileBytes) return true;
  return now_s - opened_s_ >= opt_.file_seconds;
}

std::vector<JobResult> DatasetWriter::commit() {
  if (pending_.empty()) return {};
  const ModelSpec& s = model_.spec;
  const std::string name = data_file_name(opt_, seq_);
  const std::string path = opt_.dir + "/" + name;
  const bool frames = s.has_frames();
  const bool ids = s.action_projection == ActionProjection::Tokens;  // actions as vocab ids

  // Tensors, int64 offsets first so every tensor stays 8-byte aligned in the data section.
  TensorOut offsets{"sample_offsets", "I64", {int64_t(pending_.size() + 1)}, {}};
  TensorOut ctx_offsets{"context_offsets", "I64", {int64_t(pending_.size() + 1)}, {}};
  TensorOut tokens{"tokens", "I32", {}, {}}, context{"context", "I32", {}, {}};
  TensorOut actions{"actions", "F32", {}, {}}, ctx_actions{"context_actions", "F32", {}, {}};
  if (ids) {
    actions = {"action_ids", "I32", {}, {}};
    ctx_actions = {"context_action_ids", "I32", {}, {}};
  }
  int64_t rows = 0, crows = 0;
  ordered_json manifest = ordered_json::array();
  append(offsets.bytes, &rows, 1);
  append(ctx_offsets.bytes, &crows, 1);
  for (JobResult& r : pending_) {
    const Job& job = *r.job;
    ordered_json e = manifest_entry(r, model_);
    r.tokens_file = name;
    r.row_begin = rows;
    if (frames) {
      for (const auto& f : r.frames) {
        LOOM_CHECK(int(f.size()) == s.image_tokens, "dataset: job ", r.id, " sample ", r.sample,
                   ": a frame has ", f.size(), " tokens, expected ", s.image_tokens);
        append(tokens.bytes, f.data(), f.size());
      }
      rows += int64_t(r.frames.size());
      if (opt_.actions && ids) {
        append_action_ids(actions.bytes, job, s, false, int64_t(r.frames.size()));
      } else if (opt_.actions) {
        append_actions(actions.bytes, job, s, int64_t(job.context_frames) * s.action_tokens,
                       int64_t(r.frames.size()));
      }
      if (opt_.context) {
        for (int c = 0; c < job.context_frames; ++c)
          append(context.bytes, &job.prompt[size_t(c) * size_t(s.frame_slots())],
                 size_t(s.image_tokens));
        if (opt_.actions && ids)
          append_action_ids(ctx_actions.bytes, job, s, true, job.context_frames);
        else if (opt_.actions)
          append_actions(ctx_actions.bytes, job, s, 0, job.context_frames);
        crows += job.context_frames;
      }
    } else {
      append(tokens.bytes, r.tokens.data(), r.tokens.size());
      rows += int64_t(r.tokens.size());
      if (opt_.context) {
        append(context.bytes, job.prompt.data(), job.prompt.size());
        crows += int64_t(job.prompt.size());
      }
    }
    r.row_end = rows;
    append(offsets.bytes, &rows, 1);
    append(ctx_offsets.bytes, &crows, 1);
    e["file"] = name;
    e["rows"] = {r.row_begin, r.row_end};
    manifest.push_back(std::move(e));
  }
  std::vector<TensorOut*> order{&offsets};
  if (opt_.context) order.push_back(&ctx_offsets);
  order.push_back(&tokens);
  if (frames) {
    tokens.shape = {rows, s.image_tokens};
    actions.shape = {rows, s.action_tokens, s.action_dim};
    context.shape = {crows, s.image_tokens};
    ctx_actions.shape = {crows, s.action_tokens, s.action_dim};
    if (ids) {
      actions.shape = {rows, s.action_tokens};
      ctx_actions.shape = {crows, s.action_tokens};
    }
    if (opt_.actions) order.push_back(&actions);
    if (opt_.context) order.push_back(&context);
    if (opt_.context && opt_.actions) order.push_back(&ctx_actions);
  } else {
    tokens.shape = {rows};
    context.shape = {crows};
    if (opt_.context) order.push_back(&context);
  }

  ordered_json header;
  header["__metadata__"] = {
      {"format", kFormat},
      {"schema", std::to_string(kDatasetSchema)},
      {"shard", cat(opt_.shard_index, "/", opt_.shard_count)},
      {"model", model_.name},
      {"config_hash", model_.config_hash},
      {"loom_version", kLoomVersion},
      {"draw_stream", std::to_string(kDrawStream)},
      {"manifest", manifest.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)}};
  // safetensors metadata values are strings: the block goes in as its JSON text.
  if (!run_provenance().is_null())
    header["__metadata__"]["provenance"] =
        run_provenance().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  uint64_t at = 0;
  for (const TensorOut* t : order) {
    header[t->name] = {
        {"dtype", t->dtype}, {"shape", t->shape}, {"data_offsets", {at, at + t->bytes.size()}}};
    at += t->bytes.size();
  }
  std::string text = header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t header_len = text.size();

  // 1. The data, durable under its final name.
  std::vector<Bytes> pieces{{&header_len, 8}, {text.data(), text.size()}};
  for (const TensorOut* t : order) pieces.push_back({t->bytes.data(), t->bytes.size()});
  Sha256 sum;
  for (const Bytes& b : pieces) sum.update(b.data, b.size);
  write_file_atomic(path, pieces);
  fault_point("data-file");

  // 2. Its checksum and manifest lines, appended and synced.
  append_synced(dataset_sums_path(opt_), cat(sum.hex(), "  ", name, "\n"), "checksums");
  fault_point("checksums");
  std::string lines;
  for (const auto& e : manifest)
    lines += e.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  append_synced(dataset_manifest_path(opt_), lines, "manifest");
  fault_point("manifest");

  // 3. The totals.
  ++files_;
  samples_ += int64_t(pending_.size());
  rows_ += rows;
  write_dataset_info(opt_, model_, files_, samples_, rows_, "running");

  ++seq_;
  std::vector<JobResult> done;
  done.swap(pending_);
  pending_bytes_ = 0;
  return done;
}

void DatasetWriter::finish(const std::string& state, const ordered_json& extra) {
  write_dataset_info(opt_, model_, files_, samples_, rows_, state, extra);
}

void write_dataset_info(const DatasetOptions& o, const DatasetModel& m, int64_t files,
                        int64_t samples, int64_t rows, const std::string& state,
                        const ordered_json& extra) {
  const ModelSpec& s = m.spec;
  ordered_json j;
  j["format"] = kFormat;
  j["schema"] = kDatasetSchema;
  j["model"] = {{"name", m.name}, {"architecture", m.architecture}, {"config_hash", m.config_hash}};
  j["vocab_size"] = s.vocab;
  j["frames"] = s.has_frames();
  j["tokens_per_frame"] = s.image_tokens;  // P
  j["action_tokens"] = s.action_tokens;    // A
  j["action_dim"] = s.action_dim;
  j["stores"] = {{"actions", s.has_frames() && o.actions}, {"context", o.context}};
  j["shard"] = {{"index", o.shard_index}, {"count", o.shard_count}};
  if (!o.results.empty()) j["results"] = o.results;
  if (!o.results.empty() && o.results != "-")
    j["results_relative"] = relative_to(o.results, o.dir);  // still true after a move of both
  j["manifest"] = fs::path(dataset_manifest_path(o)).filename().string();
  j["totals"] = {{"files", files}, {"samples", samples}, {"rows", rows}};
  j["state"] = state;
  j["loom_version"] = kLoomVersion;
  j["draw_stream"] = kDrawStream;
  if (!m.identity.empty()) j["run_identity"] = m.identity;
  j["updated_utc"] = utc_now_iso();
  for (auto it = extra.begin(); it != extra.end(); ++it) j[it.key()] = it.value();
  if (!run_provenance().is_null()) j["provenance"] = run_provenance();
  write_file_atomic(dataset_info_path(o), j.dump(2) + "\n");
}

void start_dataset(const DatasetOptions& o, const DatasetModel& m) {
  append_synced(dataset_manifest_path(o), "", "manifest");
  append_synced(dataset_sums_path(o), "", "checksums");
  write_dataset_info(o, m, 0, 0, 0, "running");
}

}  // namespace loom
