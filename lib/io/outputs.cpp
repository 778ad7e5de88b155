// Output probing, locking and durable writes (outputs.h).
#include "io/outputs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <regex>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fault.h"

namespace loom {
namespace fs = std::filesystem;

namespace {

// The nearest ancestor of `path` (itself included when include_self) that exists.
fs::path nearest_existing(const fs::path& path, bool include_self) {
  fs::path p = include_self ? path : path.parent_path();
  std::error_code ec;
  while (!p.empty() && !fs::exists(fs::symlink_status(p, ec))) p = p.parent_path();
  return p.empty() ? fs::path(".") : p;
}

// Creates and removes one file in `dir`; the errno of the first failure, 0 on success.
int probe_dir(const fs::path& dir) {
  const std::string probe = (dir / cat(".loom-probe-", ::getpid())).string();
  int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  int err = ::write(fd, "x", 1) == 1 ? 0 : errno;
  ::close(fd);
  if (::unlink(probe.c_str()) != 0 && err == 0) err = errno;
  return err;
}

// Whether fcntl failed because the file system has no locks at all (not because it is held).
bool no_lock_support(int err) {
  return err == ENOLCK || err == EOPNOTSUPP || err == ENOSYS || err == EINVAL;
}

int set_lock(int fd) {
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
#ifdef F_OFD_SETLK
  // Open-file-description locks: held by this descriptor, not dropped when some other
  // descriptor of the same file is closed in this process (POSIX record locks are).
  return ::fcntl(fd, F_OFD_SETLK, &fl) == 0 ? 0 : errno;
#else
  return ::fcntl(fd, F_SETLK, &fl) == 0 ? 0 : errno;
#endif
}

std::string holder_text() {
  return cat("host ", host_name(), " pid ", ::getpid(), " since ", utc_now_iso());
}

// The text of a held lock file: who holds it.
std::string lock_holder(int fd) {
  char buf[256] = {};
  ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  std::string holder = n > 0 ? std::string(buf, size_t(n)) : "a process still starting";
  while (!holder.empty() && holder.back() == '\n') holder.pop_back();
  return holder;
}

}  // namespace

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown-host";
  return buf;
}

std::string utc_now_iso() {
  using namespace std::chrono;
  const auto now = system_clock::now();
  const std::time_t t = system_clock::to_time_t(now);
  const auto ms = duration_cast<milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, int(ms));
  return buf;
}

std::string parent_dir(const std::string& path) {
  fs::path p = fs::path(path).parent_path();
  return p.empty() ? "." : p.string();
}

fs::path same_path_form(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  if (ec) p = fs::absolute(path, ec).lexically_normal();
  return p.filename().empty() ? p.parent_path() : p;  // "a/b/" → "a/b"
}

std::string relative_to(const std::string& path, const std::string& base) {
  return same_path_form(path).lexically_relative(same_path_form(base)).string();
}

bool same_path(const std::string& a, const std::string& b) {
  if (same_path_form(a) == same_path_form(b)) return true;
  struct stat sa {};
  struct stat sb {};
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

std::string run_owned(const std::string& path) {
  std::error_code ec;
  const std::string real = same_path_form(path).string();
  for (const std::string& p : {path, real}) {
    if (fs::exists(p + ".loom.json", ec))  // sidecar.h's sidecar_path
      return "a loom run's results file (" + p + ".loom.json beside it)";
  }
  auto named = [&](const std::string& suffix) {
    for (const std::string& p : {path, real})
      if (p.size() >= suffix.size() &&
          p.compare(p.size() - suffix.size(), suffix.size(), suffix) == 0)
        return true;
    return false;
  };
  if (named(".loom.json")) return "a loom run's side file";
  if (named(".lock")) return "a loom lock file";
  return "";
}

bool dataset_owned_name(const std::string& name) {
  static const std::regex owned(
      R"((manifest(\.shard-\d+-of-\d+)?\.jsonl|dataset(\.shard-\d+-of-\d+)?\.(json|lock))"
      R"(|SHA256SUMS(\.shard-\d+-of-\d+)?|data-\d+(\.shard-\d+-of-\d+)?\.safetensors)(\.tmp-\d+)?)");
  return std::regex_match(name, owned);
}

std::string dataset_owned(const std::string& path) {
  const fs::path real = same_path_form(path);
  const std::string name = real.filename().string();
  if (!dataset_owned_name(name)) return "";
  std::error_code ec;
  for (const auto& de : fs::directory_iterator(real.parent_path(), ec)) {
    const std::string n = de.path().filename().string();
    if (n != name && dataset_owned_name(n) &&
        (n.rfind("dataset", 0) == 0 || n.rfind("manifest", 0) == 0))
      return cat("a file of the token dataset in ", real.parent_path().string(), " (", n,
                 " beside it)");
  }
  return "";
}

std::string loom_owned(const std::string& path) {
  std::string why = run_owned(path);
  if (why.empty()) why = dataset_owned(path);
  if (!why.empty()) return why;
  // A run report (engine/report.h): the results file it reports on. (A merged report names
  // its shards' files, a list: merge --reports --overwrite replaces it.)
  std::error_code ec;
  const fs::path real = same_path_form(path);
  if (fs::file_size(real, ec) < (64u << 20) && !ec) {
    std::ifstream in(real);
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_object() && j.contains("generated") && j.contains("jobs") && j.contains("out") &&
        j["out"].is_string())
      return cat("a loom run's report (of ", j["out"].get<std::string>(), ")");
  }
  return "";
}

void check_file_output(const std::string& who, const std::string& option, const std::string& path,
                       bool overwrite, const std::vector<std::string>& inputs) {
  if (path == "-") return;
  for (const std::string& in : inputs) {
    LOOM_CHECK(!same_path(in, path), who, option, " ", path, " is also an input (", in,
               "); write it somewhere else");
  }
  const std::string owned = loom_owned(path);
  LOOM_CHECK(owned.empty(), who, option, " ", path, " is ", owned, "; choose another ", option);
  LOOM_CHECK(overwrite || !nonempty_file(path), who, option, " ", path,
             " already exists; pass --overwrite to replace it, or choose a new ", option);
  probe_output(option, path, false);
}

bool nonempty_file(const std::string& path) {
  struct stat sb {};
  return ::stat(path.c_str(), &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0;
}

void probe_output(const std::string& option, const std::string& path, bool is_dir) {
  LOOM_CHECK(!path.empty(), option, ": expected a path, found an empty string");
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (fs::exists(st)) {
    if (is_dir) {
      LOOM_CHECK(fs::is_directory(st), option, " ", path,
                 ": expected a folder (or a path to create one), found a file");
    } else {
      LOOM_CHECK(!fs::is_directory(st), option, " ", path,
                 ": expected a file path, found a folder");
      // Outputs are written under a temporary name and renamed into place, with side and lock
      // files beside them: a device or a pipe would be replaced by a plain file.
      const char* kind = fs::is_character_file(st) ? "a character device"
                         : fs::is_block_file(st)   ? "a block device"
                         : fs::is_fifo(st)         ? "a named pipe"
                         : fs::is_socket(st)       ? "a socket"
                                                   : nullptr;
      if (kind != nullptr)
        fail(option, " ", path, ": expected a regular file path, found ", kind,
             " (loom writes each output as a file renamed into place)");
      int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
      if (fd < 0) fail(option, " ", path, ": cannot write to it: ", std::strerror(errno));
      ::close(fd);
    }
  }
  const fs::path dir = nearest_existing(path, is_dir);
  LOOM_CHECK(fs::is_directory(fs::status(dir, ec)), option, " ", path, ": ", dir.string(),
             " is not a folder; expected a path whose parents are folders");
  if (int err = probe_dir(dir)) {
    fail(option, " ", path, ": cannot create files in ", dir.string(), " (", std::strerror(err),
         "); check the folder exists and is writable");
  }
}

void create_parent_dirs(const std::string& option, const std::string& path, bool is_dir) {
  const fs::path dir = is_dir ? fs::path(path) : fs::path(path).parent_path();
  if (dir.empty()) return;
  std::error_code ec;
  fs::create_directories(dir, ec);
  LOOM_CHECK(!ec, option, " ", path, ": cannot create folder ", dir.string(), " (", ec.message(),
             ")");
}

void sync_dir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail("cannot open folder ", dir, " to sync it: ", std::strerror(errno));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0 && err != EINVAL) fail("cannot sync folder ", dir, ": ", std::strerror(err));
}

void write_all(int fd, const void* data, size_t n, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const int err = w < 0 ? errno : ENOSPC;
      fail("cannot write ", path, ": ", std::strerror(err),
           err == ENOSPC || err == EDQUOT || err == EFBIG
               ? "; check free space, quotas and file-size limits"
               : "");
    }
    p += w;
    n -= size_t(w);
  }
}

void write_file_atomic(const std::string& path, const std::string& text) {
  write_file_atomic(path, {Bytes{text.data(), text.size()}});
}

// The file a chain of symlinks ends at (`path` itself when it is none): an output named
// through a link replaces the link's target, not the link. A loop is left to open() to report.
static std::string link_target(const std::string& path) {
  fs::path p = path;
  std::error_code ec;
  for (int hops = 0; hops < 40 && fs::is_symlink(fs::symlink_status(p, ec)); hops++) {
    const fs::path t = fs::read_symlink(p, ec);
    if (ec) break;
    p = t.is_absolute() ? t : p.parent_path() / t;
  }
  return p.string();
}

// The temporary file write_file_atomic has open, for die_by_signal: its path, valid while
// g_tmp_set (cleared before the path changes).
static char g_tmp_path[4096];
static volatile std::sig_atomic_t g_tmp_set = 0;

void die_by_signal(int sig) {
  if (g_tmp_set) ::unlink(g_tmp_path);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void on_stop_signals(void (*handler)(int)) {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old {};
    if (sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    struct sigaction sa {};
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(sig, &sa, nullptr);
  }
}

void write_file_atomic(const std::string& link, const std::vector<Bytes>& pieces) {
  const std::string path = link_target(link);
  const std::string tmp = cat(path, ".tmp-", ::getpid());
  g_tmp_set = 0;
  if (tmp.size() < sizeof g_tmp_path) {
    std::memcpy(g_tmp_path, tmp.c_str(), tmp.size() + 1);
    g_tmp_set = 1;
  }
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("cannot write ", path, ": ", std::strerror(errno));
  try {
    for (const Bytes& b : pieces) write_all(fd, b.data, b.size, path);
    if (::fsync(fd) != 0) fail("cannot write ", path, ": ", std::strerror(errno));
    fault_point("atomic-write");
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    g_tmp_set = 0;
    throw;
  }
  ::close(fd);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    g_tmp_set = 0;
    fail("cannot write ", path, ": ", std::strerror(err));
  }
  g_tmp_set = 0;
  sync_dir(parent_dir(path));
}

OutputLock::OutputLock(const std::string& lock_path, const std::string& what, bool no_lock) {
  if (no_lock) {
    // --no-lock skips taking the lock, not seeing one: where the file system has locks, one
    // that another run holds still refuses (a second writer tore and doubled records).
    int fd = ::open(lock_path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    struct flock fl {};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    const bool held = ::fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
    const std::string holder = held ? lock_holder(fd) : "";
    ::close(fd);
    LOOM_CHECK(!held, what, " is being written by another loom run (", holder, "; lock file ",
               lock_path,
               "), which holds its lock; --no-lock skips taking locks, not another "
               "run's. Wait for it, stop it, or write to another output");
    return;
  }
  // Open, lock, then check the path still names the locked file: a holder unlinks its lock
  // file while holding it, and a process that opened the old file before that must retry.
  for (int attempt = 0; attempt < 100; ++attempt) {
    int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
      fail("cannot create the lock file ", lock_path, " for ", what, ": ", std::strerror(errno));
    if (int err = set_lock(fd)) {
      if (no_lock_support(err)) {
        ::close(fd);
        fail("cannot lock ", lock_path, " for ", what, ": the file system has no locks (",
             std::strerror(err), "); pass --no-lock if you are sure no other loom writes there");
      }
      const std::string holder = lock_holder(fd);
      ::close(fd);
      fail(what, " is being written by another loom run (", holder, "; lock file ", lock_path,
           "); this run is host ", host_name(), " pid ", ::getpid(),
           ". Wait for it, stop it, or write to another output");
    }
    struct stat a {
    }, b{};
    if (::fstat(fd, &a) == 0 && ::stat(lock_path.c_str(), &b) == 0 && a.st_ino == b.st_ino &&
        a.st_dev == b.st_dev) {
      const std::string text = holder_text() + "\n";
      if (::ftruncate(fd, 0) == 0) (void)::pwrite(fd, text.data(), text.size(), 0);
      fd_ = fd;
      path_ = lock_path;
      return;
    }
    ::close(fd);  // the holder we waited on removed it: take the new one
  }
  fail("cannot lock ", lock_path, " for ", what, ": it keeps being replaced");
}

void OutputLock::release() {
  if (fd_ < 0) return;
  ::unlink(path_.c_str());
  ::close(fd_);
  fd_ = -1;
}

OutputLock::~OutputLock() {
  release();
}

OutputLock::OutputLock(OutputLock&& o) noexcept : fd_(o.fd_), path_(std::move(o.path_)) {
  o.fd_ = -1;
}

OutputLock& OutputLock::operator=(OutputLock&& o) noexcept {
  if (this != &o) {
    release();
    fd_ = o.fd_;
    path_ = std::move(o.path_);
    o.fd_ = -1;
  }
  return *this;
}

}  // namespace loom
