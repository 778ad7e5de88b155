// Checksums and `loom verify` (io/dataset_verify.cpp): SHA-256 against FIPS 180-4's examples;
// every committed data file gets its SHA256SUMS line (the one `sha256sum -c` reads); verify
// finds a whole dataset whole, and names each way one can be damaged: a changed byte, a
// truncated or missing file, a file no index lists, a stale temporary file, an index whose
// totals, state or lines disagree with the files. Through the loom binary on tiny_v1.
#include <cctype>
#include <cstdio>

#include "cli_util.h"
#include "core/sha256.h"

using namespace cli;

namespace {

const std::string kModel = " --model " + kData + "/tiny_v1";

// A finished dataset of 10 jobs (15 samples) in files of 4 samples, under dir/ds.
std::string make_dataset(const std::string& dir, const std::string& extra = "") {
  const std::string jobs = make_tiny_v1_jobs(dir + "/jobs.jsonl", 10, 2);
  Exit e = run("run -q" + kModel + " --jobs " + jobs + " --out " + dir + "/r.jsonl --tokens-out " +
                   dir + "/ds --samples-per-file 4 " + extra,
               dir);
  REQUIRE_MESSAGE(e.code == 0, e.err);
  return dir + "/ds";
}

bool has_problem(const Verified& v, const std::string& text) {
  for (const json& p : v.out.value("problems", json::array()))
    if (p.get<std::string>().find(text) != std::string::npos) return true;
  return false;
}

// Replaces the byte at `offset` from the end of `path` with its complement.
void flip_byte_from_end(const std::string& path, long offset) {
  std::FILE* f = std::fopen(path.c_str(), "r+b");
  REQUIRE(f);
  std::fseek(f, -offset, SEEK_END);
  const int c = std::fgetc(f);
  std::fseek(f, -offset, SEEK_END);
  std::fputc(~c & 0xff, f);
  std::fclose(f);
}

// Writes int32 `id` over element 0 of tensor `tensor` of the data file `path`.
void put_id(const std::string& path, const std::string& tensor, int32_t id) {
  std::FILE* f = std::fopen(path.c_str(), "r+b");
  REQUIRE(f);
  uint64_t hlen = 0;
  REQUIRE(std::fread(&hlen, 8, 1, f) == 1);
  std::string text(hlen, '\0');
  REQUIRE(std::fread(text.data(), 1, hlen, f) == hlen);
  const uint64_t at = 8 + hlen + json::parse(text)[tensor]["data_offsets"][0].get<uint64_t>();
  std::fseek(f, long(at), SEEK_SET);
  std::fwrite(&id, 4, 1, f);
  std::fclose(f);
}

}  // namespace

TEST_CASE("SHA-256: FIPS 180-4's examples, and any split of the input") {
  CHECK(loom::sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(loom::sha256_hex("abc") ==
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(loom::sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  const std::string million(1000000, 'a');
  CHECK(loom::sha256_hex(million) ==
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  for (size_t split : {size_t(1), size_t(55), size_t(64), size_t(999999)}) {
    loom::Sha256 h;
    h.update(million.substr(0, split));
    h.update(million.substr(split));
    CHECK(h.hex() == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  }
}

// sha256_file hands each piece it reads to its caller (verify checks the ids in the same
// read): in order, contiguous, every byte once.
TEST_CASE("sha256_file: the hash of the whole file, and every piece seen in order") {
  const std::string path = temp_dir("verify_sha_pieces") + "/f.bin";
  std::string bytes(size_t(5) << 19, '\0');  // 2.5 MiB: three pieces
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = char(i * 2654435761u >> 24);
  std::ofstream(path, std::ios::binary) << bytes;
  std::string seen;
  const std::string hex = loom::sha256_file(path, [&](uint64_t at, const char* p, size_t n) {
    CHECK(at == seen.size());
    seen.append(p, n);
  });
  CHECK(seen == bytes);
  CHECK(hex == loom::sha256_hex(bytes));
  CHECK(loom::sha256_file(path) == hex);
}

TEST_CASE("every data file has its SHA256SUMS line, and verify finds the dataset whole") {
  const std::string dir = temp_dir("verify_whole");
  const std::string ds = make_dataset(dir);
  // One "<sha256>  <name>" line a data file, in commit order, equal to the file's SHA-256.
  const std::vector<std::string> sums = [&] {
    std::vector<std::string> v;
    std::ifstream in(ds + "/SHA256SUMS");
    for (std::string l; std::getline(in, l);) v.push_back(l);
    return v;
  }();
  REQUIRE(sums.size() == 4);  // 15 samples, 4 a file
  for (size_t i = 0; i < sums.size(); ++i) {
    const std::string name = "data-00000" + std::to_string(i) + ".safetensors";
    CHECK(sums[i] == loom::sha256_file(ds + "/" + name) + "  " + name);
  }
  const Verified v = verify_dataset(ds, dir);
  CHECK(v.code == 0);
  CHECK(v.out["ok"] == true);
  CHECK(v.out["files"] == 4);
  CHECK(v.out["samples"] == 15);
  CHECK(v.out["rows"] == 30);
  CHECK(v.out["checksums_matched"] == 4);
  CHECK(v.out["problems"].empty());
}

TEST_CASE("verify names each kind of damage, exit 1; a folder that is no dataset, exit 2") {
  const std::string dir = temp_dir("verify_damage");
  const std::string ds = make_dataset(dir);
  const std::string base = dir + "/base";
  fs::copy(ds, base, fs::copy_options::recursive);
  auto fresh = [&] {
    fs::remove_all(ds);
    fs::copy(base, ds, fs::copy_options::recursive);
  };
  struct Damage {
    const char* what;
    std::function<void()> apply;
    std::vector<std::string> expect;  // each must be in some problem
  };
  const std::string d1 = ds + "/data-000001.safetensors";
  const std::vector<Damage> cases = {
      {"one token byte changed",
       [&] { flip_byte_from_end(d1, 3); },
       {"data-000001.safetensors: SHA-256 ", "its bytes changed after loom wrote it"}},
      {"a file cut short",
       [&] { fs::resize_file(d1, fs::file_size(d1) - 8); },
       {"data-000001.safetensors: truncated", "its bytes changed"}},
      {"a byte appended",  // (said "truncated" for a file that grew)
       [&] { std::ofstream(d1, std::ios::app) << 'x'; },
       {"data-000001.safetensors: bytes after its data: ", "its bytes changed"}},
      {"a file removed",
       [&] { fs::remove(d1); },
       {"data-000001.safetensors: missing (named by manifest.jsonl line 5)"}},
      {"a data file no index lists",
       [&] { fs::copy_file(d1, ds + "/data-000007.safetensors"); },
       {"data-000007.safetensors: a data file no manifest lists"}},
      {"a token id outside the vocabulary",
       [&] { put_id(d1, "tokens", 1000); },
       {"data-000001.safetensors: tokens element 0 is 1000, outside the vocabulary [0, 1000)"}},
      {"a context id below 0",
       [&] { put_id(d1, "context", -7); },
       {"data-000001.safetensors: context element 0 is -7, outside the vocabulary [0, 1000)"}},
      {"a shard's index beside the unsharded one",
       [&] { fs::copy_file(ds + "/dataset.json", ds + "/dataset.shard-0-of-2.json"); },
       {"dataset.shard-0-of-2.json: a shard's index beside an unsharded dataset.json"}},
      {"a temporary file left",
       [&] { std::ofstream(ds + "/manifest.jsonl.tmp-9") << "x"; },
       {"manifest.jsonl.tmp-9: a temporary file"}},
      {"a checksum line removed",
       [&] {
         const std::string s = slurp(ds + "/SHA256SUMS");
         std::ofstream(ds + "/SHA256SUMS") << s.substr(s.find('\n') + 1);
       },
       {"data-000000.safetensors: no checksum in any SHA256SUMS file"}},
      {"a manifest line twice",
       [&] {
         const std::string s = slurp(ds + "/manifest.jsonl");
         std::ofstream(ds + "/manifest.jsonl", std::ios::app) << s.substr(0, s.find('\n') + 1);
       },
       {"manifest.jsonl line 16: job job-0 sample 0 again (first in manifest.jsonl line 1)"}},
      {"a manifest line dropped",
       [&] {
         const std::string s = slurp(ds + "/manifest.jsonl");
         std::ofstream(ds + "/manifest.jsonl") << s.substr(s.find('\n') + 1);
       },
       {"dataset.json: totals.samples is 15, its manifest manifest.jsonl has 14",
        "data-000000.safetensors: holds 4 samples, the manifest lists 3"}},
      {"dataset.json describing another form than its files",
       [&] {
         json info = json::parse(slurp(ds + "/dataset.json"));
         info["tokens_per_frame"] = 11;
         info["stores"]["actions"] = false;
         std::ofstream(ds + "/dataset.json") << info.dump(2);
       },
       {"data-000000.safetensors: its tokens per frame is 10, dataset.json says 11",
        "data-000000.safetensors: its action rows is true, dataset.json says false"}},
      {"a field of dataset.json of the wrong type (not a crash, not exit 2)",
       [&] {
         json info = json::parse(slurp(ds + "/dataset.json"));
         info["totals"]["files"] = "4";
         std::ofstream(ds + "/dataset.json") << info.dump(2);
       },
       {"dataset.json: a field of the wrong type"}},
      {"a malformed checksum line, and a data file gone: both said",
       [&] {
         std::ofstream(ds + "/SHA256SUMS", std::ios::app) << "not a checksum line\n";
         fs::remove(ds + "/data-000003.safetensors");
       },
       {"SHA256SUMS line 5: expected", "data-000003.safetensors: missing"}},
      {"a checksum line for a file that is no data file",
       [&] {
         std::ofstream(ds + "/SHA256SUMS", std::ios::app)
             << std::string(64, '0') << "  dataset.json\n";
       },
       {"dataset.json: has a SHA256SUMS line but is no data file the index lists"}},
      {"an index still running",
       [&] {
         json info = json::parse(slurp(ds + "/dataset.json"));
         info["state"] = "running";
         std::ofstream(ds + "/dataset.json") << info.dump(2);
       },
       {"dataset.json: state \"running\", not \"complete\""}},
  };
  for (const Damage& c : cases) {
    CAPTURE(c.what);
    fresh();
    c.apply();
    const Verified v = verify_dataset(ds, dir);
    CHECK(v.code == 1);
    CHECK(v.out["ok"] == false);
    for (const std::string& e : c.expect)
      CHECK_MESSAGE(has_problem(v, e), e, " in ", v.out.dump(2));
  }
  fresh();
  CHECK(verify_dataset(ds, dir).code == 0);  // the copies were whole
  // sha256sum's other forms of a line: upper-case digits, the binary marker, CRLF.
  {
    std::string sums = slurp(ds + "/SHA256SUMS");
    for (size_t i = 0; i < 64; ++i) sums[i] = char(std::toupper(sums[i]));
    sums.replace(sums.find("  ", sums.find('\n')), 2, " *");
    sums.insert(sums.rfind('\n'), "\r");
    std::ofstream(ds + "/SHA256SUMS") << sums;
    const Verified v = verify_dataset(ds, dir);
    CHECK(v.code == 0);
    CHECK(v.out["checksums_matched"] == 4);
  }

  for (const std::string& not_ds : {dir + "/nothing", dir + "/r.jsonl", dir}) {
    CAPTURE(not_ds);
    const Verified v = verify_dataset(not_ds, dir);
    CHECK(v.code == 2);
    CHECK(v.err.find("loom: error: verify " + not_ds + ": ") == 0);
  }
}

TEST_CASE("verify compares the index's KV dtype with its files', as it does draw_stream") {
  const std::string dir = temp_dir("verify_kv_dtype");
  const std::string ds = make_dataset(dir, "--backend cpu --kv-dtype fp8");
  const std::string d0 = "data-000000.safetensors: its KV dtype is \"fp8\", dataset.json's ";
  CHECK(verify_dataset(ds, dir).code == 0);
  const std::string whole = slurp(ds + "/dataset.json");
  auto edited = [&](const std::function<void(json&)>& edit) {
    json info = json::parse(whole);
    edit(info);
    std::ofstream(ds + "/dataset.json") << info.dump(2);
    return verify_dataset(ds, dir);
  };
  // The index made to say f32 (its run_identity as an f32 run's, or its provenance).
  Verified v = edited([](json& info) {
    info["run_identity"].erase("kv_dtype");
    info["run_identity"].erase("kv_scales");
  });
  CHECK(v.code == 1);
  CHECK_MESSAGE(has_problem(v, d0 + "run_identity.kv_dtype is absent (expected the file's, or "
                                    "absent where the cache took the compute dtype)"),
                v.out.dump(2));
  v = edited([](json& info) { info["provenance"]["dtype"]["kv"] = "f32"; });
  CHECK(v.code == 1);
  CHECK_MESSAGE(has_problem(v, d0 + "provenance.dtype.kv is \"f32\""), v.out.dump(2));
  // The same kind of edit to draw_stream is caught too (the check this one follows).
  v = edited([](json& info) { info["draw_stream"] = 3; });
  CHECK(v.code == 1);
  CHECK(has_problem(v, "data-000000.safetensors: its draw_stream is"));
  std::ofstream(ds + "/dataset.json") << whole;
  CHECK(verify_dataset(ds, dir).code == 0);
  // An f32 dataset whose index claims an FP8 cache.
  const std::string f32 = dir + "/f32";
  fs::create_directories(f32);
  const std::string ds32 = make_dataset(f32, "--backend cpu");
  json info = json::parse(slurp(ds32 + "/dataset.json"));
  info["run_identity"]["kv_dtype"] = "fp8";
  std::ofstream(ds32 + "/dataset.json") << info.dump(2);
  v = verify_dataset(ds32, f32);
  CHECK(v.code == 1);
  CHECK_MESSAGE(has_problem(v,
                            "data-000000.safetensors: its KV dtype is \"f32\", dataset.json's "
                            "run_identity.kv_dtype is \"fp8\""),
                v.out.dump(2));
  // A bf16 cache under f32 arithmetic is recorded as such (loom 0.6.1): an index saying bf16
  // for f32 files is caught, one saying f32 passes.
  info["run_identity"]["kv_dtype"] = "bf16";
  std::ofstream(ds32 + "/dataset.json") << info.dump(2);
  CHECK(has_problem(verify_dataset(ds32, f32),
                    "its KV dtype is \"f32\", dataset.json's run_identity.kv_dtype is \"bf16\""));
  info["run_identity"]["kv_dtype"] = "f32";
  std::ofstream(ds32 + "/dataset.json") << info.dump(2);
  CHECK(verify_dataset(ds32, f32).code == 0);
}

TEST_CASE("shards: each verified before the merge and the merged index after; a shard missing") {
  const std::string dir = temp_dir("verify_shards");
  const std::string jobs = make_tiny_v1_jobs(dir + "/jobs.jsonl", 9, 2);
  for (int k = 0; k < 3; ++k) {
    Exit e = run("run -q" + kModel + " --jobs " + jobs + " --out " + dir + "/r" +
                     std::to_string(k) + ".jsonl --tokens-out " + dir + "/ds --shard " +
                     std::to_string(k) + "/3 --samples-per-file 2",
                 dir);
    REQUIRE_MESSAGE(e.code == 0, e.err);
  }
  Verified v = verify_dataset(dir + "/ds", dir);
  CHECK(v.code == 0);
  CHECK(v.out["indexes"].size() == 3);
  CHECK(v.out["samples"] == 13);  // 9 jobs, every second one with 2 samples
  CHECK(v.out["checksums_matched"] == v.out["files"]);
  REQUIRE(run("merge --dataset " + dir + "/ds", dir).code == 0);
  v = verify_dataset(dir + "/ds", dir);
  CHECK(v.code == 0);
  CHECK(v.out["indexes"] == json::array({"dataset.json"}));
  CHECK(v.out["samples"] == 13);
  const json merged = json::parse(slurp(dir + "/ds/dataset.json"));
  CHECK(!merged.contains("results"));  // each shard's index names its own results file
  CHECK(!merged.contains("results_relative"));
  // A shard's index changed after the merge: the merged one no longer describes it.
  const std::string m2 = dir + "/ds/manifest.shard-2-of-3.jsonl", kept = slurp(m2);
  std::ofstream(m2) << kept.substr(kept.find('\n') + 1);
  v = verify_dataset(dir + "/ds", dir);
  CHECK(v.code == 1);
  CHECK(has_problem(v, "manifest.jsonl: not the lines of the shards' manifests"));
  std::ofstream(m2) << kept;

  // Without the merged index, a shard's files gone: the missing shard is said.
  for (const char* f : {"dataset.json", "manifest.jsonl", "dataset.shard-1-of-3.json",
                        "manifest.shard-1-of-3.jsonl"})
    fs::remove(dir + "/ds/" + f);
  v = verify_dataset(dir + "/ds", dir);
  CHECK(v.code == 1);
  CHECK(has_problem(v, "dataset.shard-1-of-3.json: missing (shard 1/3 never ran here)"));
  CHECK(has_problem(v, "data-000000.shard-1-of-3.safetensors: a data file no manifest lists"));
}

TEST_CASE("a dataset from before SHA256SUMS gets them on --resume; --overwrite replaces them") {
  const std::string dir = temp_dir("verify_old");
  const std::string ds = make_dataset(dir);
  const std::string sums = slurp(ds + "/SHA256SUMS");
  fs::remove(ds + "/SHA256SUMS");  // as loom 0.5.0 left it
  Verified v = verify_dataset(ds, dir);
  CHECK(v.code == 0);
  CHECK(v.out["checksums_matched"] == 0);
  CHECK(v.out["notes"][0].get<std::string>().find("no SHA256SUMS file") == 0);

  const std::string args = "run -q" + kModel + " --jobs " + dir + "/jobs.jsonl --out " + dir +
                           "/r.jsonl --tokens-out " + ds + " --samples-per-file 4";
  Exit e = run(args + " --resume", dir);
  REQUIRE(e.code == 0);
  CHECK(e.err.empty());  // a dataset from before the checksums: nothing to warn about
  CHECK(slurp(ds + "/SHA256SUMS") == sums);  // made from the files, the same lines

  // A line lost from an existing SHA256SUMS: hashed again, but said (a change made before
  // would now pass verify).
  std::ofstream(ds + "/SHA256SUMS") << sums.substr(sums.find('\n') + 1);
  e = run(args + " --resume", dir);
  REQUIRE(e.code == 0);
  CHECK(e.err.find("had no line for data-000000.safetensors (lost or edited)") !=
        std::string::npos);
  CHECK(slurp(ds + "/SHA256SUMS") == sums);

  // --overwrite with fewer jobs: the old files' lines go with them.
  make_tiny_v1_jobs(dir + "/jobs.jsonl", 2, 2);
  REQUIRE(run(args + " --overwrite", dir).code == 0);
  v = verify_dataset(ds, dir);
  CHECK(v.code == 0);
  CHECK(v.out["files"] == 1);
  CHECK(v.out["checksums_matched"] == 1);

  // SHA256SUMS is the dataset's own name: no output may take it.
  e = run(args + " --overwrite --report " + ds + "/SHA256SUMS", dir);
  CHECK(e.code == 2);
  CHECK(e.err.find("takes a name the dataset writes") != std::string::npos);
}

// A shard given no jobs (2 jobs, 3 shards) is an empty shard: its manifest and checksums exist,
// empty, so merge and verify take it; one from loom 0.5.0 (only its dataset.json, totals 0)
// too.
TEST_CASE("a shard given no jobs merges and verifies as an empty shard") {
  const std::string dir = temp_dir("verify_empty_shard");
  const std::string jobs = make_tiny_v1_jobs(dir + "/jobs.jsonl", 2, 2);
  for (int k = 0; k < 3; ++k)
    REQUIRE(run("run -q" + kModel + " --jobs " + jobs + " --out " + dir + "/r.jsonl --tokens-out " +
                    dir + "/ds --shard " + std::to_string(k) + "/3",
                dir)
                .code == 0);
  CHECK(fs::file_size(dir + "/ds/manifest.shard-2-of-3.jsonl") == 0);
  CHECK(fs::file_size(dir + "/ds/SHA256SUMS.shard-2-of-3") == 0);
  CHECK(verify_dataset(dir + "/ds", dir).code == 0);
  fs::remove(dir + "/ds/manifest.shard-2-of-3.jsonl");  // as loom 0.5.0 left it
  fs::remove(dir + "/ds/SHA256SUMS.shard-2-of-3");
  CHECK(verify_dataset(dir + "/ds", dir).code == 0);
  Exit m = run("merge --dataset " + dir + "/ds", dir);
  CHECK_MESSAGE(m.code == 0, m.err);
  CHECK(m.err.find("merged 3 of 3 dataset shards: 3 samples") != std::string::npos);
  Verified v = verify_dataset(dir + "/ds", dir);
  CHECK(v.code == 0);
  CHECK(v.out["samples"] == 3);  // job-0 one sample, job-1 two
}
