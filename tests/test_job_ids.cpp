// Job ids (lib/io/job_ids.h and the JobReader's use of it): duplicates within a run are refused
// with one error record for the later line; 8 and "8" are one id; "line-N" of an id-less line
// is the explicit id "line-N"; a forced hash collision still tells ids apart and finds real
// duplicates, on a regular file (re-read by offset) and on stdin (ids kept); lines of other
// shards are not indexed; and the memory of 1M ids, measured.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/job_ids.h"
#include "io/jobs.h"

using namespace loom;
namespace fs = std::filesystem;

namespace {

fs::path temp_dir() {
  fs::path dir = fs::temp_directory_path() / ("loom_test_job_ids_" + std::to_string(getpid()));
  fs::create_directories(dir);
  return dir;
}

void put(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << bytes;
}

ModelSpec plain_spec() {
  ModelSpec s;
  s.vocab = 1000;
  s.max_positions = 64;
  return s;
}

uint64_t same_hash(std::string_view) {
  return 42;  // every id collides with every other
}

// A plain job line with the JSON id `id` ("" for none).
std::string job(const std::string& id) {
  std::string head = id.empty() ? "{" : "{\"id\":" + id + ",";
  return head + "\"prompt_token_ids\":[1,2],\"max_tokens\":2}\n";
}

// What each line read gives: "id@line" for a job, "error@line: message" for an error.
std::vector<std::string> read_all(const std::string& path, IdHash hash = nullptr, int shard = 0,
                                  int shards = 1) {
  JobReader reader(path, plain_spec(), JobDefaults{});
  if (hash) reader.set_id_hash(hash);
  reader.set_shard(shard, shards);
  std::vector<std::string> out;
  Job j;
  JobError e;
  bool ok = false;
  while (reader.next(j, e, ok)) {
    out.push_back(ok ? j.id + (j.id_is_number ? "(n)" : "") + "@" + std::to_string(j.line)
                     : "error:" + e.id + (e.id_is_number ? "(n)" : "") + "@" +
                           std::to_string(e.line) + ": " + e.message);
  }
  return out;
}

// The same, read from stdin (a pipe: not seekable) instead of the file.
std::vector<std::string> read_stdin(const fs::path& path, IdHash hash) {
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  REQUIRE(text.size() < 60000);  // fits a pipe's buffer: written whole before reading
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  REQUIRE(write(fds[1], text.data(), text.size()) == ssize_t(text.size()));
  close(fds[1]);
  int saved = dup(0);
  dup2(fds[0], 0);
  close(fds[0]);
  std::vector<std::string> out;
  try {
    out = read_all("-", hash);
  } catch (...) {
    dup2(saved, 0);
    close(saved);
    throw;
  }
  dup2(saved, 0);
  close(saved);
  return out;
}

int64_t status_kib(const char* key) {  // VmRSS (now) or VmHWM (peak) of this process
  std::ifstream in("/proc/self/status");
  for (std::string s; std::getline(in, s);)
    if (s.rfind(key, 0) == 0) return std::stoll(s.substr(std::strlen(key)));
  return -1;
}

// What `fill` adds to RSS while what it built is alive (it calls `measure` then), now and at
// the peak, measured in a forked child: this process's heap has other tests' holes in it.
struct Added {
  int64_t now_kib = -1, peak_kib = -1;
};
Added rss_added(const std::function<void(const std::function<void()>&)>& fill) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    Added a;
    const int64_t before = status_kib("VmRSS:");
    fill([&] {
      a.now_kib = status_kib("VmRSS:") - before;
      a.peak_kib = status_kib("VmHWM:") - before;
    });
    _exit(write(fds[1], &a, sizeof a) == ssize_t(sizeof a) ? 0 : 1);
  }
  close(fds[1]);
  Added a;
  ssize_t got = read(fds[0], &a, sizeof a);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  REQUIRE(got == ssize_t(sizeof a));
  return a;
}

}  // namespace

TEST_SUITE("job_ids") {
  TEST_CASE("JobIdIndex: new ids give 0, a repeated id gives the earlier line") {
    JobIdIndex ids;  // a stream: the ids are kept
    CHECK(ids.add("a", 1, 0) == 0);
    CHECK(ids.add("b", 2, 10) == 0);
    CHECK(ids.add("8", 4, 20) == 0);
    CHECK(ids.add("a", 7, 30) == 1);
    CHECK(ids.add("8", 9, 40) == 4);
    CHECK(ids.size() == 3);  // a repeat is not added
    for (int i = 0; i < 5000; ++i) REQUIRE(ids.add("id-" + std::to_string(i), 100 + i, 0) == 0);
    CHECK(ids.add("id-1234", 99999, 0) == 1334);  // found across table growth
    CHECK(ids.rereads() == 3);                    // only the three real repeats compared texts
  }

  TEST_CASE("JobIdIndex: a forced collision compares the real ids, kept or re-read") {
    // A stream: the texts are kept in the index.
    JobIdIndex kept(nullptr, same_hash);
    CHECK(kept.add("a", 1, 0) == 0);
    CHECK(kept.add("b", 2, 0) == 0);
    CHECK(kept.add("c", 3, 0) == 0);
    CHECK(kept.add("b", 4, 0) == 2);
    CHECK(kept.rereads() == 1 + 2 + 2);  // b saw a; c saw a, b; the repeat of b saw a, b
    // A file: the earlier id is re-read by its line's offset.
    std::map<uint64_t, std::string> file = {{0, "a"}, {10, "b"}, {25, "c"}};
    std::vector<uint64_t> asked;
    JobIdIndex reread(
        [&](int64_t, uint64_t offset) {
          asked.push_back(offset);
          return file.at(offset);
        },
        same_hash);
    CHECK(reread.add("a", 1, 0) == 0);
    CHECK(reread.add("b", 2, 10) == 0);
    CHECK(reread.add("c", 3, 25) == 0);
    CHECK(reread.add("c", 5, 40) == 3);
    CHECK(asked == std::vector<uint64_t>{0, 0, 10, 0, 10, 25});
    // A file that changed under the run: its old id no longer hashes the same.
    JobIdIndex changed([](int64_t, uint64_t) { return std::string("edited"); });
    CHECK(changed.add("a", 1, 0) == 0);
    CHECK_THROWS_WITH_AS(changed.add("a", 2, 9),
                         "the jobs file changed while it was read: line 1 no longer has the id it "
                         "had; do not edit a jobs file during a run",
                         loom::Error);
  }

  TEST_CASE("duplicates: one error record for the later line, with the field, id and lines") {
    fs::path dir = temp_dir();
    fs::path p = dir / "jobs.jsonl";
    put(p, job("\"dup\"") + job("8") + job("\"dup\"") + "\n" + job("\"8\"") +
               job("") +                          // line 6: no id → "line-6"
               job("\"line-6\"") +                // line 7: the same id, explicit
               job("\"line-9\"") +                // line 8
               job("") +                          // line 9: "line-9" is line 8's already
               "{\"id\":\"dup\",\"oops\":1}\n" +  // line 10: bad, and a duplicate id
               job("18446744073709551615") + job("-5"));
    const std::vector<std::string> expected = {
        "dup@1",
        "8(n)@2",
        "error:dup@3: line 3: field \"id\": \"dup\" is already the id of line 1; expected ids "
        "unique within a run",
        "error:8@5: line 5: field \"id\": \"8\" is already the id of line 2; expected ids unique "
        "within a run (ids are compared as text: 8 and \"8\" are the same id)",
        "line-6@6",
        "error:line-6@7: line 7: field \"id\": \"line-6\" is already the id of line 6; expected "
        "ids unique within a run",
        "line-9@8",
        "error:line-9@9: line 9: without a readable \"id\" this line's id is \"line-9\", which "
        "is already the id of line 8; expected ids unique within a run",
        "error:dup@10: line 10: field \"id\": \"dup\" is already the id of line 1; expected ids "
        "unique within a run",
        "18446744073709551615(n)@11",
        "-5(n)@12",
    };
    CHECK(read_all(p.string()) == expected);
    // Forced collisions: every id hashes alike, and the answers are the same.
    CHECK(read_all(p.string(), same_hash) == expected);
    CHECK(read_stdin(p, same_hash) == expected);
    CHECK(read_stdin(p, nullptr) == expected);
    fs::remove_all(dir);
  }

  TEST_CASE("a forced collision tells different ids apart: no error for distinct ids") {
    fs::path dir = temp_dir();
    fs::path p = dir / "jobs.jsonl";
    std::string text = "\xEF\xBB\xBF" + job("\"a\"");  // a BOM on line 1, re-read as well
    std::vector<std::string> expected = {"a@1"};
    for (int i = 2; i <= 40; ++i) {
      text += job("\"id-" + std::to_string(i) + "\"");
      expected.push_back("id-" + std::to_string(i) + "@" + std::to_string(i));
    }
    text += "{\"id\":\"a\"}\r\n";  // CRLF and bad: still the id "a", a duplicate
    expected.push_back(
        "error:a@41: line 41: field \"id\": \"a\" is already the id of line 1; expected ids "
        "unique within a run");
    put(p, text);
    CHECK(read_all(p.string(), same_hash) == expected);
    CHECK(read_stdin(p, same_hash) == expected);
    fs::remove_all(dir);
  }

  TEST_CASE("ids are unique within a shard: lines of other shards are not indexed") {
    fs::path dir = temp_dir();
    fs::path p = dir / "jobs.jsonl";
    // Non-blank lines j = 0..3: shard 0 of 2 reads j = 0, 2; shard 1 reads j = 1, 3.
    put(p, job("\"a\"") + job("\"a\"") + job("\"b\"") + job("\"b\""));
    CHECK(read_all(p.string(), nullptr, 0, 2) == std::vector<std::string>{"a@1", "b@3"});
    CHECK(read_all(p.string(), nullptr, 1, 2) == std::vector<std::string>{"a@2", "b@4"});
    put(p, job("\"a\"") + job("\"x\"") + job("\"a\""));
    CHECK(read_all(p.string(), nullptr, 0, 2) ==
          std::vector<std::string>{"a@1",
                                   "error:a@3: line 3: field \"id\": \"a\" is already the id of "
                                   "line 1; expected ids unique within a run"});
    fs::remove_all(dir);
  }

  TEST_CASE("RSS of 1M ids: a file's index keeps hashes, a stream's keeps the ids too") {
    const int kIds = 1000000;
    auto fill = [&](bool stream, const std::function<void()>& measure) {
      JobIdIndex::IdAt id_at;
      if (!stream) id_at = [](int64_t line, uint64_t) { return "job-" + std::to_string(line); };
      JobIdIndex ids(id_at);
      uint64_t offset = 0;
      for (int i = 1; i <= kIds; ++i) {
        if (ids.add("job-" + std::to_string(i), i, offset) != 0) _exit(3);
        offset += 500;
      }
      if (ids.size() != size_t(kIds)) _exit(4);
      measure();
    };
    Added file = rss_added([&](const std::function<void()>& m) { fill(false, m); });
    Added stream = rss_added([&](const std::function<void()>& m) { fill(true, m); });
    const int64_t file_kib = file.now_kib, stream_kib = stream.now_kib;
    MESSAGE("1M ids: +", file.now_kib, " KiB RSS (peak +", file.peak_kib,
            " KiB) for a regular file; +", stream.now_kib, " KiB (peak +", stream.peak_kib,
            " KiB) for stdin (ids \"job-N\", 5-11 bytes)");
    // 24 bytes an entry and a 4-byte slot, the table at most half full: 24 + 8 bytes an id,
    // ~31 MiB; a stream adds each id and its 4-byte length, ~14 MiB here.
    CHECK(file_kib > 20000);  // a measurement that saw the index at all
    CHECK(file_kib < 40000);
    CHECK(stream_kib - file_kib > 10000);
    CHECK(stream_kib < 60000);
  }
}
