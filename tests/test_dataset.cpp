// The token dataset (`--tokens-out`, issue 11 §6) through the loom binary: every sample in the
// files equals the JSONL stream of the same run, for frame and plain models; actions and
// context frames are the job's; file names never depend on job ids; shards in one folder
// merge into one index; and the README's numpy + safetensors snippet reads it
// (tests/dataset_check.py, where a Python with both is at hand).
#include <cmath>
#include <set>

#include "cli_util.h"
#include "core/philox.h"
#include "core/version.h"

using namespace cli;

namespace {

json job_by_id(const std::string& jobs_path, const std::string& id) {
  for (const json& j : read_lines(jobs_path))
    if (id_text(j["id"]) == id) return j;
  FAIL("no job ", id);
  return {};
}

}  // namespace

TEST_CASE("the dataset equals the JSONL stream of the same run, for every model") {
  for (const std::string model : {"tiny_v1", "tiny_v2", "tiny_llama"}) {
    CAPTURE(model);
    const std::string dir = temp_dir("dataset_" + model);
    const std::string jobs = kData + "/jobs/" + model + ".jsonl";
    Exit e = run("run -q --model " + kData + "/" + model + " --jobs " + jobs + " --out " + dir +
                     "/r.jsonl --tokens-out " + dir + "/ds --samples-per-file 2",
                 dir);
    REQUIRE(e.code == 0);
    const auto records = tokens_by_sample(dir + "/r.jsonl");
    CHECK(records.size() >= 4);
    CHECK(dataset_samples(dir + "/ds") == records);

    // Records name their file and rows, exactly as the manifest does.
    std::map<std::pair<std::string, int>, json> manifest;
    for (const json& m : read_lines(dir + "/ds/manifest.jsonl"))
      manifest[{id_text(m["id"]), m["sample"].get<int>()}] = m;
    for (const json& r : read_lines(dir + "/r.jsonl")) {
      const json& m = manifest.at({id_text(r["id"]), r["sample"].get<int>()});
      CHECK(r["tokens_file"] == m["file"]);
      CHECK(r["rows"] == m["rows"]);
      CHECK(r["line"] == m["line"]);
      const json job = job_by_id(jobs, id_text(r["id"]));
      if (job.contains("sampling") && job["sampling"].contains("seed"))
        CHECK(m["seed"] == job["sampling"]["seed"]);
      CHECK(m["config_hash"].get<std::string>().rfind("fnv1a64:", 0) == 0);
    }
    // File names are data-NNNNNN.safetensors whatever the ids are.
    for (const auto& de : fs::directory_iterator(dir + "/ds")) {
      const std::string n = de.path().filename().string();
      if (de.path().extension() == ".safetensors")
        CHECK((n.size() == 23 && n.rfind("data-", 0) == 0));
    }
    const json info = json::parse(slurp(dir + "/ds/dataset.json"));
    const json cfg = json::parse(slurp(kData + "/" + model + "/config.json"));
    CHECK(info["vocab_size"] == cfg["vocab_size"]);
    CHECK(info["tokens_per_frame"] == cfg.value("num_image_patches", 0));
    CHECK(info["totals"]["samples"] == records.size());
    CHECK(info["state"] == "complete");
    CHECK(info["shard"] == json{{"index", 0}, {"count", 1}});
  }
}

TEST_CASE("actions and context frames are the job's; the last frame's missing rows are NaN") {
  const std::string dir = temp_dir("dataset_actions");
  const std::string jobs = kData + "/jobs/tiny_v1.jsonl";
  REQUIRE(run("run -q --model " + kData + "/tiny_v1 --jobs " + jobs + " --out " + dir +
                  "/r.jsonl --tokens-out " + dir + "/ds",
              dir)
              .code == 0);
  const json cfg = json::parse(slurp(kData + "/tiny_v1/config.json"));
  const int P = cfg["num_image_patches"], A = cfg["num_action_tokens"], S = P + A;
  int checked = 0;
  for (const json& m : read_lines(dir + "/ds/manifest.jsonl")) {
    const json job = job_by_id(jobs, id_text(m["id"]));
    loom::SafetensorsFile f =
        loom::SafetensorsFile::open(dir + "/ds/" + m["file"].get<std::string>());
    const auto* acts = static_cast<const float*>(f.tensor("actions").data);
    const auto* ctx = static_cast<const int32_t*>(f.tensor("context").data);
    const auto* coff = static_cast<const int64_t*>(f.tensor("context_offsets").data);
    const auto* ctx_acts = static_cast<const float*>(f.tensor("context_actions").data);
    const int n_ctx = m["context_frames"];
    const int64_t b = m["rows"][0], e = m["rows"][1];
    // Find this sample's index in the file by its rows.
    const auto* off = static_cast<const int64_t*>(f.tensor("sample_offsets").data);
    int64_t i = 0;
    while (off[i] != b) ++i;
    CHECK(coff[i + 1] - coff[i] == n_ctx);
    for (int c = 0; c < n_ctx; ++c)
      for (int t = 0; t < P; ++t)
        CHECK(ctx[(coff[i] + c) * P + t] == job["prompt_token_ids"][size_t(c * S + t)]);
    const json& rows = job["actions"];
    for (int64_t fr = 0; fr < e - b; ++fr) {
      for (int a = 0; a < A; ++a) {
        const size_t job_row = size_t((n_ctx + fr) * A + a);
        for (int d = 0; d < 3; ++d) {
          const float got = acts[((b + fr) * A + a) * 3 + d];
          if (job_row < rows.size()) {
            CHECK(got == rows[job_row][size_t(d)].get<float>());
          } else {
            CHECK(std::isnan(got));  // the job left the last frame's rows out
          }
        }
      }
    }
    for (int a = 0; a < n_ctx * A; ++a)
      CHECK(ctx_acts[(coff[i] * A + a) * 3] == rows[size_t(a)][0].get<float>());
    ++checked;
  }
  CHECK(checked == 5);
}

TEST_CASE("--no-tokens-in-results, --no-dataset-actions/-context, --file-seconds 0") {
  const std::string dir = temp_dir("dataset_options");
  const std::string base =
      "run -q --model " + kData + "/tiny_v1 --jobs " + kData + "/jobs/tiny_v1.jsonl --out " + dir;
  REQUIRE(run(base + "/full.jsonl", dir).code == 0);
  const auto full = tokens_by_sample(dir + "/full.jsonl");
  REQUIRE(run(base + "/lean.jsonl --tokens-out " + dir + "/lean --no-tokens-in-results " +
                  "--no-dataset-actions --no-dataset-context --file-seconds 0",
              dir)
              .code == 0);
  for (const json& r : read_lines(dir + "/lean.jsonl")) {
    CHECK(!r.contains("frames"));
    CHECK(r.contains("tokens_file"));
  }
  CHECK(dataset_samples(dir + "/lean") == full);
  int files = 0;
  for (const auto& de : fs::directory_iterator(dir + "/lean")) {
    if (de.path().extension() != ".safetensors") continue;
    ++files;
    loom::SafetensorsFile f = loom::SafetensorsFile::open(de.path().string());
    CHECK(f.find("actions") == nullptr);
    CHECK(f.find("context") == nullptr);
  }
  CHECK(files == int(full.size()));  // --file-seconds 0: every sample commits at once
  Exit bad = run(base + "/x.jsonl --no-tokens-in-results", dir);
  CHECK(bad.code == 2);
  CHECK(bad.err.find("--no-tokens-in-results needs --tokens-out DIR") != std::string::npos);
}

TEST_CASE("shards share one folder; merge --dataset joins them, refusing gaps") {
  const std::string dir = temp_dir("dataset_merge");
  const std::string jobs = make_tiny_v1_jobs(dir + "/jobs.jsonl", 12, 3);
  const std::string base = "run -q --model " + kData + "/tiny_v1 --jobs " + jobs;
  REQUIRE(run(base + " --out " + dir + "/one.jsonl", dir).code == 0);
  const auto one = tokens_by_sample(dir + "/one.jsonl");
  for (int k : {0, 2}) {
    REQUIRE(run(base + " --shard " + std::to_string(k) + "/3 --out " + dir +
                    "/r.jsonl --tokens-out " + dir + "/ds --samples-per-file 2",
                dir)
                .code == 0);
  }
  Exit gap = run("merge --dataset " + dir + "/ds", dir);
  CHECK(gap.code == 2);
  CHECK(gap.err == "loom: error: merge --dataset " + dir + "/ds: shard 1/3 missing (no " +
                       "dataset.shard-1-of-3.json); run it, or pass --allow-partial\n");
  CHECK(!fs::exists(dir + "/ds/manifest.jsonl"));

  Exit partial = run("merge --dataset " + dir + "/ds --allow-partial", dir);
  CHECK(partial.code == 1);
  CHECK(partial.err.find("missing shards [1]") != std::string::npos);
  CHECK(json::parse(slurp(dir + "/ds/dataset.json"))["state"] == "partial");

  REQUIRE(run(base + " --shard 1/3 --out " + dir + "/r.jsonl --tokens-out " + dir +
                  "/ds --samples-per-file 2",
              dir)
              .code == 0);
  // A merge stopped between its two writes left its temporary files, which nothing removed
  // (verify then failed for good): the next merge removes them.
  std::ofstream(dir + "/ds/dataset.json.tmp-99999") << "{";
  std::ofstream(dir + "/ds/manifest.jsonl.tmp-99999") << "{";
  Exit whole = run("merge --dataset " + dir + "/ds", dir);
  CHECK(whole.code == 0);
  CHECK(!fs::exists(dir + "/ds/dataset.json.tmp-99999"));
  CHECK(!fs::exists(dir + "/ds/manifest.jsonl.tmp-99999"));
  CHECK(verify_dataset(dir + "/ds", dir).code == 0);
  const json info = json::parse(slurp(dir + "/ds/dataset.json"));
  CHECK(info["state"] == "complete");
  CHECK(info["totals"]["samples"] == one.size());
  CHECK(info["shard"]["merged_from"] == 3);
  // Every sample once through the merged manifest.
  std::set<std::pair<std::string, int>> keys;
  for (const json& m : read_lines(dir + "/ds/manifest.jsonl"))
    CHECK(keys.insert({id_text(m["id"]), m["sample"].get<int>()}).second);
  CHECK(keys.size() == one.size());

  // A shard drawn with another Philox stream (an older loom's: no draw_stream) is refused.
  const std::string shard1 = dir + "/ds/dataset.shard-1-of-3.json";
  const std::string kept = slurp(shard1);
  json older = json::parse(kept);
  REQUIRE(older["draw_stream"] == loom::kDrawStream);
  older.erase("draw_stream");
  older["loom_version"] = "0.2.0";
  std::ofstream(shard1) << older.dump();
  Exit mixed = run("merge --dataset " + dir + "/ds", dir);
  CHECK(mixed.code == 2);
  CHECK(mixed.err.find(shard1 + " was drawn with draw stream 1 (loom 0.2.0), ") !=
        std::string::npos);
  CHECK(mixed.err.find("with draw stream 4 (loom " + std::string(loom::kLoomVersion) +
                       "); expected one stream") != std::string::npos);
  std::ofstream(shard1) << kept;

  // An unsharded run must not take over the merged folder's index.
  Exit over = run(base + " --out " + dir + "/u.jsonl --tokens-out " + dir + "/ds", dir);
  CHECK(over.code == 2);
  CHECK(over.err.find("holds the merged index of a sharded run") != std::string::npos);
}

TEST_CASE("the README's numpy + safetensors reader loads the dataset (tests/dataset_check.py)") {
  const char* py = std::getenv("LOOM_PYTHON");
  if (!py || !fs::exists(py) ||
      std::system((std::string(py) + " -c 'import numpy, safetensors' 2>/dev/null").c_str()) != 0) {
    MESSAGE(
        "SKIPPED: no Python with numpy and safetensors (LOOM_PYTHON); scripts/test.sh makes one");
    return;
  }
  const std::string dir = temp_dir("dataset_py");
  for (const std::string model : {"tiny_v1", "tiny_llama"}) {
    REQUIRE(run("run -q --model " + kData + "/" + model + " --jobs " + kData + "/jobs/" + model +
                    ".jsonl --out " + dir + "/" + model + ".jsonl --tokens-out " + dir + "/" +
                    model + " --samples-per-file 3",
                dir)
                .code == 0);
    const std::string cmd = std::string(py) + " " + LOOM_SOURCE_DIR + "/tests/dataset_check.py " +
                            dir + "/" + model + " " + dir + "/" + model + ".jsonl";
    CHECK(std::system(cmd.c_str()) == 0);
  }
}

TEST_CASE("action-token model: the dataset stores the action ids, int32 [rows, A]; -1 if none") {
  const std::string dir = temp_dir("dataset_action_ids");
  const std::string model = kData + "/tiny_action_tokens";
  const std::string jobs = kData + "/jobs/tiny_action_tokens.jsonl";
  REQUIRE(run("run -q --model " + model + " --jobs " + jobs + " --out " + dir +
                  "/r.jsonl --tokens-out " + dir + "/ds --samples-per-file 2",
              dir)
              .code == 0);
  CHECK(dataset_samples(dir + "/ds") == tokens_by_sample(dir + "/r.jsonl"));
  const json cfg = json::parse(slurp(model + "/config.json"));
  const int P = cfg["num_image_patches"], A = cfg["num_action_tokens"], S = P + A;
  int checked = 0, missing_rows = 0;
  for (const json& m : read_lines(dir + "/ds/manifest.jsonl")) {
    const json job = job_by_id(jobs, id_text(m["id"]));
    loom::SafetensorsFile f =
        loom::SafetensorsFile::open(dir + "/ds/" + m["file"].get<std::string>());
    CHECK(f.find("actions") == nullptr);  // no empty float rows of width action_dim 0
    const loom::Tensor ids = f.tensor("action_ids"), ctx_ids = f.tensor("context_action_ids");
    REQUIRE(ids.dtype == loom::DType::I32);
    REQUIRE(ctx_ids.dtype == loom::DType::I32);
    CHECK(ids.shape == std::vector<int64_t>{f.tensor("tokens").shape[0], A});
    CHECK(ctx_ids.shape == std::vector<int64_t>{f.tensor("context").shape[0], A});
    const auto* got = static_cast<const int32_t*>(ids.data);
    const auto* got_ctx = static_cast<const int32_t*>(ctx_ids.data);
    const auto* off = static_cast<const int64_t*>(f.tensor("sample_offsets").data);
    const auto* coff = static_cast<const int64_t*>(f.tensor("context_offsets").data);
    const int64_t b = m["rows"][0], e = m["rows"][1];
    int64_t i = 0;
    while (off[i] != b) ++i;
    const json& rows = job["action_token_ids"];
    for (int64_t fr = 0; fr < e - b; ++fr)
      for (int a = 0; a < A; ++a) {
        const int32_t want = size_t(fr) < rows.size() ? rows[size_t(fr)][size_t(a)].get<int>() : -1;
        CHECK(got[(b + fr) * A + a] == want);
        missing_rows += want == -1;
      }
    const int n_ctx = m["context_frames"];
    CHECK(coff[i + 1] - coff[i] == n_ctx);
    for (int c = 0; c < n_ctx; ++c)
      for (int a = 0; a < A; ++a)
        CHECK(got_ctx[(coff[i] + c) * A + a] == job["prompt_token_ids"][size_t(c * S + P + a)]);
    ++checked;
  }
  CHECK(checked == 5);
  CHECK(missing_rows == 3 * A);  // two jobs, three samples, leave their last row out
}

// The records name their data files; a --resume that finds them gone (the folder moved, a file
// deleted) dropped those records and ran the samples again, silently. Only the last file may
// be missing (a rollback killed between removing it and dropping its records).
TEST_CASE("--resume refuses records whose data files were moved or deleted, keeping them") {
  const std::string dir = temp_dir("dataset_moved");
  const std::string args = "run -q --model " + kData + "/tiny_v1 --jobs " + kData +
                           "/jobs/tiny_v1.jsonl --out " + dir + "/r.jsonl --tokens-out " + dir +
                           "/ds --samples-per-file 2";
  REQUIRE(run(args, dir).code == 0);
  const std::string records = slurp(dir + "/r.jsonl");
  REQUIRE(fs::exists(dir + "/ds/data-000002.safetensors"));

  fs::rename(dir + "/ds", dir + "/moved");
  Exit moved = run(args + " --resume", dir);
  CHECK(moved.code == 2);
  CHECK(moved.err.find("which holds no manifest of this shard (manifest.jsonl; moved or "
                       "deleted?)") != std::string::npos);
  CHECK(slurp(dir + "/r.jsonl") == records);
  fs::remove_all(dir + "/ds");
  fs::rename(dir + "/moved", dir + "/ds");

  fs::rename(dir + "/ds/data-000000.safetensors", dir + "/first.safetensors");
  Exit deleted = run(args + " --resume", dir);
  CHECK(deleted.code == 2);
  CHECK(deleted.err.find("1 data files named by the records of " + dir +
                         "/r.jsonl are missing from --tokens-out " + dir +
                         "/ds (data-000000.safetensors; moved or deleted?)") != std::string::npos);
  CHECK(slurp(dir + "/r.jsonl") == records);

  fs::rename(dir + "/first.safetensors", dir + "/ds/data-000000.safetensors");
  CHECK(run(args + " --resume", dir).code == 0);
  CHECK(slurp(dir + "/r.jsonl") == records);
  CHECK(verify_dataset(dir + "/ds", dir).code == 0);
}

// Shards read the whole jobs file, each keeping its lines; what they read is recorded
// (jobs_read: lines and a hash of them all). Shards that read other lines (a shared pipe, lines
// appended between their runs) merged and verified as whole with jobs missing or doubled.
TEST_CASE("shards that read other job lines, or of another model, are not one dataset") {
  const std::string dir = temp_dir("dataset_jobs_read");
  const std::string jobs = make_tiny_v1_jobs(dir + "/jobs.jsonl", 6, 2);
  auto shard = [&](int k, const std::string& extra) {
    return run("run -q --model " + kData + "/tiny_v1 --jobs " + jobs + " --out " + dir +
                   "/r.jsonl --tokens-out " + dir + "/ds --shard " + std::to_string(k) + "/2 " +
                   extra,
               dir);
  };
  REQUIRE(shard(0, "").code == 0);
  const std::string more = make_tiny_v1_jobs(dir + "/more.jsonl", 8, 2);
  fs::copy_file(more, jobs, fs::copy_options::overwrite_existing);  // 2 lines appended
  REQUIRE(shard(1, "").code == 0);
  const json side0 = json::parse(slurp(dir + "/r.shard-0-of-2.jsonl.loom.json"));
  CHECK(side0["jobs_read"]["lines"] == 6);
  CHECK(json::parse(slurp(dir + "/ds/dataset.shard-1-of-2.json"))["jobs_read"]["lines"] == 8);

  const std::string results = dir + "/r.shard-0-of-2.jsonl " + dir + "/r.shard-1-of-2.jsonl";
  Exit merged = run("merge --out " + dir + "/all.jsonl " + results, dir);
  CHECK(merged.code == 2);
  CHECK(merged.err.find("are not shards of one run (their side files): they read other job "
                        "lines (jobs_read {\"hash\":") != std::string::npos);
  Exit ds = run("merge --dataset " + dir + "/ds", dir);
  CHECK(ds.code == 2);
  CHECK(ds.err.find("are not shards of one run: they read other job lines") != std::string::npos);
  const Verified v = verify_dataset(dir + "/ds", dir);
  CHECK(v.code == 1);
  CHECK(v.out["problems"].dump().find("are not shards of one run: they read other job lines") !=
        std::string::npos);

  // Resumed on the whole file, shard 0 runs its new job and agrees.
  REQUIRE(shard(0, "--resume").code == 0);
  CHECK(run("merge --jobs " + jobs + " --out " + dir + "/all.jsonl " + results, dir).code == 0);
  CHECK(run("merge --dataset " + dir + "/ds", dir).code == 0);
  CHECK(verify_dataset(dir + "/ds", dir).code == 0);

  // A shard run with another --seed is another run: its dataset.json says so (run_identity).
  REQUIRE(shard(1, "--overwrite --seed 7").code == 0);
  Exit seeded = run("merge --dataset " + dir + "/ds", dir);
  CHECK(seeded.code == 2);
  CHECK(seeded.err.find("are not shards of one run: their runs differ in seed: 7 and (absent)") !=
        std::string::npos);
  CHECK(verify_dataset(dir + "/ds", dir).code == 1);
  REQUIRE(shard(1, "--overwrite").code == 0);

  // A shard of another model into this folder is refused before it writes.
  const std::string before = slurp(dir + "/r.shard-1-of-2.jsonl");
  Exit other = run("run -q --model " + kData + "/tiny_v2 --jobs " + jobs + " --out " + dir +
                       "/r.jsonl --tokens-out " + dir + "/ds --shard 1/2 --overwrite",
                   dir);
  CHECK(slurp(dir + "/r.shard-1-of-2.jsonl") == before);
  CHECK(other.code == 2);
  CHECK(other.err.find("the shards of one folder are one run") != std::string::npos);
}
