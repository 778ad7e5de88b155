// Running the loom binary from tests: a private temp folder per process, loom started without
// a shell (so signals reach it) with extra environment and an optional file-size limit, and
// readers for results and datasets.
#pragma once

#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "io/job_ids.h"
#include "io/safetensors.h"

namespace cli {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kLoom = std::string(LOOM_BIN_DIR) + "/loom";
const std::string kData = LOOM_TESTDATA;

// A fresh folder for this test process: /tmp/loom_<tag>_<pid>.
inline std::string temp_dir(const std::string& tag) {
  fs::path dir = fs::temp_directory_path() / ("loom_" + tag + "_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

inline std::vector<std::string> split_words(const std::string& args) {
  std::vector<std::string> words;
  std::istringstream in(args);
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

struct Spawned {
  pid_t pid = -1;
  std::string err_path;
};

// Starts `loom <args>` with `env` added, stderr to `err_path`, and RLIMIT_FSIZE = fsize when
// fsize > 0 (a file-size limit, as a quota or `ulimit -f` gives).
inline Spawned spawn(const std::string& args, const std::string& err_path,
                     const std::vector<std::string>& env = {}, rlim_t fsize = 0) {
  std::vector<std::string> words = split_words(args);
  words.insert(words.begin(), kLoom);
  Spawned s;
  s.err_path = err_path;
  s.pid = fork();
  if (s.pid == 0) {
    for (const std::string& e : env) putenv(const_cast<char*>(e.c_str()));
    if (fsize > 0) {
      struct rlimit rl {
        fsize, fsize
      };
      setrlimit(RLIMIT_FSIZE, &rl);
    }
    int fd = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) dup2(fd, 2);
    std::vector<char*> argv;
    for (std::string& w : words) argv.push_back(w.data());
    argv.push_back(nullptr);
    execv(kLoom.c_str(), argv.data());
    _exit(127);
  }
  return s;
}

struct Exit {
  int code = -1;    // exit code, or -1 when killed by a signal
  int signal = 0;   // the signal that ended it, 0 when it exited
  std::string err;  // its stderr
};

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every file below `dir`, with its bytes.
inline std::map<std::string, std::string> tree(const std::string& dir) {
  std::map<std::string, std::string> m;
  for (const auto& de : fs::recursive_directory_iterator(dir))
    if (de.is_regular_file()) m[de.path().string()] = slurp(de.path().string());
  return m;
}

inline Exit wait_for(const Spawned& s) {
  int status = 0;
  waitpid(s.pid, &status, 0);
  Exit e;
  if (WIFEXITED(status)) e.code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) e.signal = WTERMSIG(status);
  e.err = slurp(s.err_path);
  return e;
}

// Waits (30 s at most) until the file at `path` holds `text` ("": anything), as a run that
// started writing it does.
inline void wait_until_holds(const std::string& path, const std::string& text) {
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30)) {
    const std::string now = slurp(path);
    if (!now.empty() && now.find(text) != std::string::npos) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

inline Exit run(const std::string& args, const std::string& dir,
                const std::vector<std::string>& env = {}, rlim_t fsize = 0) {
  return wait_for(spawn(args, dir + "/stderr.txt", env, fsize));
}

// `loom verify --json <ds>`: its exit code and what it printed (null when it printed no JSON).
struct Verified {
  int code = -1;
  json out;
  std::string err;
};
inline Verified verify_dataset(const std::string& ds, const std::string& dir) {
  const std::string out = dir + "/verify.json", err = dir + "/verify.err";
  const int st =
      std::system((kLoom + " verify --json '" + ds + "' > " + out + " 2> " + err).c_str());
  Verified v;
  v.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  v.out = json::parse(slurp(out), nullptr, false);
  v.err = slurp(err);
  return v;
}

inline std::vector<json> read_lines(const std::string& path) {
  std::vector<json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(json::parse(line));
  return out;
}

using loom::id_text;  // an id as compared: "8" and 8 alike (io/job_ids.h)

// (id, sample) → generated tokens of every ok record ("frames" or "tokens"); CHECKs that no
// (id, sample) appears twice.
inline std::map<std::pair<std::string, int>, json> tokens_by_sample(const std::string& path) {
  std::map<std::pair<std::string, int>, json> m;
  for (const json& r : read_lines(path)) {
    if (r["status"] != "ok") continue;
    std::pair<std::string, int> key{id_text(r["id"]), r["sample"].get<int>()};
    CHECK_MESSAGE(m.count(key) == 0, "duplicate record ", key.first, " ", key.second);
    m[key] = r.contains("frames") ? r["frames"] : r["tokens"];
  }
  return m;
}

// (id, sample) → tokens read from a dataset folder through its manifests (all shards), as
// nested lists like the records'. CHECKs: every data file is named by the manifest, no
// (id, sample) twice, rows match the files' sample_offsets, and the files hold no samples
// the manifest does not list.
inline std::map<std::pair<std::string, int>, json> dataset_samples(const std::string& dir) {
  std::map<std::pair<std::string, int>, json> m;
  std::map<std::string, int64_t> listed;  // file → samples the manifests list
  for (const auto& de : fs::directory_iterator(dir)) {
    const std::string n = de.path().filename().string();
    if (n.rfind("manifest", 0) != 0 || de.path().extension() != ".jsonl") continue;
    for (const json& e : read_lines(de.path().string())) {
      const std::string file = e["file"];
      loom::SafetensorsFile f = loom::SafetensorsFile::open(dir + "/" + file);
      const loom::Tensor t = f.tensor("tokens");
      const loom::Tensor off = f.tensor("sample_offsets");
      const int64_t b = e["rows"][0], end = e["rows"][1];
      const int64_t i = listed[file]++;
      const int64_t* o = static_cast<const int64_t*>(off.data);
      CHECK(o[i] == b);
      CHECK(o[i + 1] == end);
      const int32_t* d = static_cast<const int32_t*>(t.data);
      json tokens = json::array();
      if (t.shape.size() == 2) {
        for (int64_t r = b; r < end; ++r)
          tokens.push_back(std::vector<int32_t>(d + r * t.shape[1], d + (r + 1) * t.shape[1]));
      } else {
        tokens = std::vector<int32_t>(d + b, d + end);
      }
      std::pair<std::string, int> key{id_text(e["id"]), e["sample"].get<int>()};
      CHECK_MESSAGE(m.count(key) == 0, "duplicate dataset sample ", key.first, " ", key.second);
      m[key] = tokens;
    }
  }
  for (const auto& de : fs::directory_iterator(dir)) {
    const std::string n = de.path().filename().string();
    if (de.path().extension() != ".safetensors") continue;
    CHECK_MESSAGE(listed.count(n) == 1, "data file ", n, " is in no manifest");
    loom::SafetensorsFile f = loom::SafetensorsFile::open(de.path().string());
    CHECK(f.tensor("sample_offsets").shape[0] == listed[n] + 1);  // no orphan samples
  }
  return m;
}

// A jobs file of `n` tiny_v1 jobs derived from the sample job: new ids, seeds, frame counts;
// with bad_lines, an invalid line after every 17th job (from the 5th).
inline std::string make_tiny_v1_jobs(const std::string& path, int n, int frames,
                                     bool bad_lines = false) {
  std::ifstream in(kData + "/jobs/tiny_v1.jsonl");
  std::string line;
  std::getline(in, line);
  json base = json::parse(line);
  std::ofstream out(path);
  for (int i = 0; i < n; i++) {
    json j = base;
    j["id"] = "job-" + std::to_string(i);
    j["num_frames"] = frames;
    j["num_samples"] = 1 + i % 2;
    j["sampling"] = {{"temperature", 0.9}, {"seed", 1000 + i}};
    const size_t rows = (j["prompt_token_ids"].size() / 13 + size_t(frames)) * 3;
    j["actions"] = json::array();
    for (size_t r = 0; r < rows; r++) j["actions"].push_back({0.01 * double(r), 1.0, 0.5});
    out << j.dump() << "\n";
    if (bad_lines && i % 17 == 5) out << "{\"id\": \"bad-" << i << "\", \"num_frames\": 0}\n";
  }
  return path;
}

}  // namespace cli
