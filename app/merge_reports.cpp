// `loom merge --reports`: merges the run reports of a sharded run (lib/engine/report_merge.h)
// and writes the result whole or not at all: a temporary file beside --out, fsync, rename.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "app/commands.h"
#include "core/error.h"
#include "engine/report_merge.h"
#include "io/outputs.h"

namespace loom {

int merge_reports_command(const std::vector<std::string>& reports, const std::string& out,
                          bool overwrite) {
  // The reports and the jobs files they name are inputs too (their results files are a run's).
  std::vector<std::string> inputs = reports;
  for (const std::string& r : reports) {
    std::ifstream in(r);
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_object() && j.contains("jobs") && j["jobs"].is_string() && j["jobs"] != "-")
      inputs.push_back(j["jobs"]);
    // A stopped shard's results lack samples: the merge of the results refuses it too.
    const nlohmann::json::json_pointer stopped("/jobs_summary/stopped");
    LOOM_CHECK(!j.is_object() || !j.contains(stopped) || j[stopped] != true, "merge: ", r,
               " is the report of a stopped shard (jobs_summary.stopped); finish it with `loom "
               "run --resume`, then merge");
  }
  check_file_output("merge: ", "--out", out, overwrite, inputs);
  const nlohmann::json merged = merge_reports(reports);
  const std::string text = merged.dump(2) + "\n";
  if (out == "-") {
    LOOM_CHECK(
        std::fwrite(text.data(), 1, text.size(), stdout) == text.size() && std::fflush(stdout) == 0,
        "cannot write the merged report to stdout: ", std::strerror(errno));
  } else {
    write_file_atomic(out, text);  // whole or not at all
  }
  const nlohmann::json& gen = merged["generated"];
  // What the results files hold, where the reports say (loom 0.5.0's do not): after a
  // resubmission the last runs' work (generated) can be far less, even nothing.
  const std::string records =
      merged.contains("records")
          ? cat("; the results files hold ", merged["records"].value("ok", int64_t(0)),
                " samples and ", merged["records"].value("error", int64_t(0)), " error records")
          : std::string();
  std::fprintf(stderr,
               "loom: merged %zu reports: these runs generated %lld tokens, %lld frames in %.2f "
               "s (%.1f tokens/s; %.1f summed over shards)%s; into %s\n",
               reports.size(), (long long)gen["tokens"].get<int64_t>(),
               (long long)gen["frames"].get<int64_t>(), merged["time_s"]["run"].get<double>(),
               gen["tokens_per_s"].get<double>(),
               gen["sum_of_shard_rates"]["tokens_per_s"].get<double>(), records.c_str(),
               out == "-" ? "stdout" : out.c_str());
  return kExitOk;
}

}  // namespace loom
