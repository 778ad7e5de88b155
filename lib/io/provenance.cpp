// Build and run provenance (provenance.h).
#include "io/provenance.h"

#include <fstream>
#include <iterator>

#include "core/version.h"
#include "loom_build_info.h"  // generated (cmake/loom_build_info.cmake)

namespace loom {
using nlohmann::ordered_json;

namespace {

const std::chrono::system_clock::time_point kProcessStart = std::chrono::system_clock::now();

ordered_json& process_block() {
  static ordered_json block;
  return block;
}

}  // namespace

const BuildInfo& build_info() {
  static const BuildInfo info = [] {
    BuildInfo b;
    b.version = kLoomVersion;
    b.commit = LOOM_BUILD_COMMIT;
    b.dirty = LOOM_BUILD_DIRTY != 0;
    b.build_type = LOOM_BUILD_TYPE;
    b.cuda = LOOM_BUILD_CUDA != 0;
    b.cuda_archs = LOOM_BUILD_CUDA_ARCHS;
    b.compiler = LOOM_BUILD_COMPILER;
    b.cuda_compiler = LOOM_BUILD_CUDA_COMPILER;
    return b;
  }();
  return info;
}

std::string commit_text() {
  const BuildInfo& b = build_info();
  return b.dirty ? b.commit + "-dirty" : b.commit;
}

std::string version_text() {
  const BuildInfo& b = build_info();
  std::string cuda = "CUDA off";
  if (b.cuda) cuda = "CUDA on (" + b.cuda_archs + ", " + b.cuda_compiler + ")";
  return "loom " + b.version + "\ncommit " + commit_text() + "\nbuild " +
         (b.build_type.empty() ? std::string("(no build type)") : b.build_type) + ", " + cuda +
         ", " + b.compiler;
}

std::chrono::system_clock::time_point process_start_time() {
  return kProcessStart;
}

std::vector<std::string> process_argv() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> argv;
  size_t at = 0;
  while (at < raw.size()) {  // NUL after every argument, the last one included
    const size_t end = raw.find('\0', at);
    argv.push_back(raw.substr(at, end == std::string::npos ? std::string::npos : end - at));
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return argv;
}

std::string shell_quote(const std::string& word) {
  auto safe = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string("%+,-./:=@_").find(c) != std::string::npos;
  };
  bool plain = !word.empty();
  for (char c : word) plain = plain && safe(c);
  if (plain) return word;
  std::string q = "'";
  for (char c : word) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string shell_join(const std::vector<std::string>& words) {
  std::string s;
  for (const std::string& w : words) s += (s.empty() ? "" : " ") + shell_quote(w);
  return s;
}

ordered_json provenance_json(const RunProvenance& p) {
  const BuildInfo& b = build_info();
  ordered_json j;
  j["loom_version"] = b.version;
  j["commit"] = b.commit;
  j["dirty"] = b.dirty;
  j["build"] = {{"type", b.build_type},
                {"cuda", b.cuda},
                {"cuda_archs", b.cuda_archs},
                {"compiler", b.compiler},
                {"cuda_compiler", b.cuda_compiler}};
  j["started_utc"] = p.started_utc;
  j["host"] = p.host;
  j["command_line"] = shell_join(p.argv);
  j["argv"] = p.argv;
  j["options"] = p.options;
  j["options_from_env"] = p.options_from_env;
  j["shard"] = {{"index", p.shard_index}, {"count", p.shard_count}, {"source", p.shard_source}};
  j["model"] = {
      {"path", p.model_path}, {"architecture", p.architecture}, {"config_hash", p.config_hash}};
  j["backend"] = p.backend;
  j["dtype"] = {{"weights", p.weight_dtype}, {"kv", p.kv_dtype}};
  if (!p.kv_scales.empty()) j["dtype"]["kv_scales"] = p.kv_scales;
  j["device"] = {{"name", p.device}, {"driver", p.driver}, {"cuda_runtime", p.cuda_runtime}};
  return j;
}

void set_run_provenance(ordered_json block) {
  process_block() = std::move(block);
}

const ordered_json& run_provenance() {
  return process_block();
}

}  // namespace loom
