// `loom merge --reports` (issue 11 §8): the run reports of the N shards of one sharded run
// (report.h) merged into one report of the whole run. Counts are summed; rates are recomputed
// over the merged wall time (earliest start to latest end, from the reports' UTC times); the
// frame-latency statistics are recomputed from the per-frame times in the shards' results
// files, which each report names in "out" — not averaged from the shards' percentiles, which
// cannot be combined. It lives beside report.cpp because it reads the report's schema; it reads
// the results files (io's format) itself, line by line, in bounded memory.
//
// It refuses rather than guesses, naming both files where two disagree: a file that is not a
// loom run report, reports of different models or shard counts, two reports of one shard, a
// shard with no report, and a results file that cannot be found or read. Reports of runs whose
// tokens differ (their run_identity: seed, KV dtype and scales, ...) are refused as merge
// --dataset refuses such shards (shards_differ).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace loom {

// The merged report; the rule for every field is in the table at the top of report_merge.cpp.
// One report merges too (a run of shard 0/1): its totals, rates and frame statistics come out
// recomputed the same way.
nlohmann::json merge_reports(const std::vector<std::string>& report_paths);

}  // namespace loom
