// A `loom run`'s outputs, made safe before the model loads (issue 11 §2–§4): every path is
// probed, refused runs leave nothing behind, each output has one writer, a finished output is
// never replaced without --overwrite, and --resume continues only records made by the same
// model and options, with the dataset reconciled against them.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "app/commands.h"
#include "backend/backend.h"
#include "io/dataset.h"
#include "io/outputs.h"
#include "io/resume.h"
#include "io/shard.h"

namespace loom {

struct RunOutputs {
  Shard shard;
  std::string out_path;             // --out with the shard tag ("-": stdout)
  std::string report_path;          // --report with the shard tag ("-": stdout, "": none)
  std::string sidecar;              // <out_path>.loom.json ("" for stdout)
  DatasetOptions dataset;           // dataset.dir "" when no --tokens-out
  DatasetModel model;               // identity of the model (also the dataset's)
  nlohmann::ordered_json identity;  // what a resume must match (sidecar "identity")
  CacheRequest kv;                  // --kv-dtype and --kv-scales, the file read once
  ResumeState done;                 // --resume: what the results file already holds
  DatasetReconcile reconciled;      // --resume with --tokens-out
  OutputLock out_lock, report_lock, dataset_lock;
  // --resume and --overwrite: the side file and dataset.json as they were, so that a run
  // refused before it changed anything (another jobs file, found as its lines are read; a KV
  // pool that does not fit) can put them back.
  std::string sidecar_before, dataset_info_before;
  bool changed = false;          // records, data files or a reconciliation written by this run
  bool replace_pending = false;  // --overwrite: the old output goes at replace_outputs
  // Files and folders that did not exist before this run (files first, then folders deepest
  // first): a run that fails before its first change removes them, leaving nothing behind.
  std::vector<std::string> created;
  bool index_retired = false;  // retire_merged_index has run
};

// Checks, creates, locks and (with --resume) reconciles; prints the warnings and the resume
// line unless quiet. `backend` and `dtype` are the run's ("cuda", "bf16"): part of the identity.
// Throws loom::Error (one CLI line) for every refusal, before anything is created.
void prepare_outputs(const RunArgs& a, const std::string& backend, const std::string& dtype,
                     RunOutputs& o);

// --overwrite, once the engine is ready: marks the side file "replacing" (a --resume after a
// kill now is refused, naming --overwrite), then removes the old results and this shard's
// dataset files. Nothing when no --overwrite is pending.
void replace_outputs(RunOutputs& o, bool quiet);

// Sets the "state" of this shard's dataset.json ("replacing", "failed" with its "error"), where
// the run has a dataset and its index is there.
void set_dataset_state(const RunOutputs& o, const std::string& state,
                       const std::string& error = "");

// Releases the locks and removes what o.created lists (files, then folders that are empty).
// files = false: only the folders (a refusal before every lock was held: a file there may
// be another run's, made since the check).
void remove_created(RunOutputs& o, bool files = true);

// A shard's first change to a --tokens-out folder holding a merged index (loom merge --dataset)
// makes that index stale, and a reader would take it for the dataset: it is removed (once, and
// before the change; the next merge writes it again). Called by prepare_outputs before
// --overwrite removes the shard's files or after --resume rolled one back, and by the run
// before its first sample reaches the dataset, so a run refused before that leaves it.
void retire_merged_index(RunOutputs& o, bool quiet);

}  // namespace loom
