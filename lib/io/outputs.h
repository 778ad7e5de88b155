// A run's outputs are safe before any work starts (issue 11 §2–§4, design §8):
//   - probe_output: each output path is checked by creating and removing a temporary file in
//     the nearest folder that exists, so a refused run leaves nothing behind; missing parent
//     folders are created later (create_parent_dirs), once every check has passed;
//   - OutputLock: one writer per output, an exclusive fcntl lock on a lock file that names its
//     holder (host, pid, start time), so a second run fails at once naming both;
//   - write_file_atomic / sync_dir: data before index — bytes reach stable storage under a
//     temporary name, then are renamed into place and the folder entry is synced.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace loom {

// Checks that `path` could be created as a file (or, with is_dir, as a folder holding files):
// it must not be a folder (a file, for is_dir), and the nearest existing ancestor must be a
// folder where a file can be created and removed; an existing path must be a regular file
// (a folder, for is_dir), never a device or a pipe. `option` names the flag in errors
// ("--out"). Creates nothing that outlives the call. Throws loom::Error on failure.
void probe_output(const std::string& option, const std::string& path, bool is_dir);

// Creates the missing folders above `path` (or `path` itself with is_dir); throws naming it.
void create_parent_dirs(const std::string& option, const std::string& path, bool is_dir);

// A path in the form two spellings of one file share: absolute, "." and ".." folded, the
// symlinks of its existing part resolved (what does not exist yet is taken as written).
std::filesystem::path same_path_form(const std::string& path);

// `path` relative to folder `base`, both in same_path_form ("../r.jsonl"): what stays true when
// a folder holding both moves.
std::string relative_to(const std::string& path, const std::string& base);

// Whether `a` and `b` name one file: the same form, or both exist and are one inode (a hard
// link, a bind mount).
bool same_path(const std::string& a, const std::string& b);

// Why `path` is a file of a loom run's that no other output may take ("" when it is none): a
// results file (its side file `<path>.loom.json` beside it, through any symlink), a side file
// or a lock file (by their names).
std::string run_owned(const std::string& path);

// Whether `name` is one loom writes in a --tokens-out folder (any shard's: data files,
// manifests, indexes, checksums, the lock) or a temporary file of one.
bool dataset_owned_name(const std::string& name);

// Why `path` is a token dataset's own file ("" when it is none): a name dataset_owned_name
// takes, beside another of the dataset's indexes or manifests.
std::string dataset_owned(const std::string& path);

// Why `path` is a file of a loom run's that the output of another command (calibrate, bench,
// merge) may not replace ("" when it is none): run_owned's, dataset_owned's, or a run report
// (a merged report is not: merge --reports replaces it).
std::string loom_owned(const std::string& path);

// A single-file output of a command other than `run` (calibrate --out, bench --json, merge
// --out), checked before any work: never a run's file (loom_owned: its results, side file,
// lock, report or dataset files), never one of `inputs`, an existing
// one replaced only with overwrite, and its folder able to take it (probe_output). `who` and
// `option` name it in errors ("merge: ", "--out"). "-" (stdout) passes.
void check_file_output(const std::string& who, const std::string& option, const std::string& path,
                       bool overwrite, const std::vector<std::string>& inputs = {});

// True when `path` exists and is a regular file with at least one byte.
bool nonempty_file(const std::string& path);

// fsync of a folder, so a rename or a new entry in it survives a power loss. Throws on error
// (EINVAL, from file systems that cannot sync folders, is accepted).
void sync_dir(const std::string& dir);

// The pieces, in order, → `<path>.tmp-<pid>`, fsync, rename over `path`, sync the folder;
// where `path` is a symlink, over the file its chain ends at (the link stays a link). Throws
// naming the file; leaves no temporary file behind on failure.
struct Bytes {
  const void* data;
  size_t size;
};
void write_file_atomic(const std::string& path, const std::vector<Bytes>& pieces);
// `handler` for SIGINT, SIGTERM and SIGHUP, except one ignored on entry (`nohup` keeps
// SIGHUP ignored); SA_RESTART, as std::signal: a write to a pipe is not cut short.
void on_stop_signals(void (*handler)(int));
// The temporary file write_file_atomic has open removed, then `sig` with its default action
// (async-signal-safe): main's handler for every command, so one killed inside an atomic write
// leaves no `<out>.tmp-<pid>` behind; `loom run` puts a clean stop over it.
void die_by_signal(int sig);
void write_file_atomic(const std::string& path, const std::string& text);

// write(2) until done; EINTR retried; throws naming `path` (ENOSPC, EFBIG, EIO...).
void write_all(int fd, const void* data, size_t n, const std::string& path);

std::string host_name();
std::string utc_now_iso();  // "2026-11-24T22:31:05.123Z"

// The folder part of a path ("a/b.jsonl" → "a", "b.jsonl" → ".").
std::string parent_dir(const std::string& path);

class OutputLock {
 public:
  OutputLock() = default;
  // Locks `lock_path` (created if missing) for the output `what` ("--out results.jsonl").
  // Throws loom::Error naming this process and the holder when another process holds it, and
  // when the file system has no locks (unless no_lock, which skips locking altogether).
  OutputLock(const std::string& lock_path, const std::string& what, bool no_lock);
  ~OutputLock();  // unlinks the lock file while still holding it, then closes
  OutputLock(OutputLock&& o) noexcept;
  OutputLock& operator=(OutputLock&& o) noexcept;
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

 private:
  void release();
  int fd_ = -1;
  std::string path_;
};

}  // namespace loom
