#include "backend/backend.h"

#include "core/error.h"

namespace loom {

void StepBatch::clear() {
  tokens.clear();
  positions.clear();
  actions.clear();
  slot_start.assign(1, 0);
  kv_len.clear();
  block_tables.clear();
  blocks_per_seq = 0;
  sample.clear();
  sampling.clear();
  sample_index.clear();
  draw_index.clear();
  want_logits = false;
}

void Backend::collect_kv_stats(const KvScales*) {
  throw Error(cat("the ", name(), " backend collects no KV statistics (loom calibrate)"));
}
KvStats Backend::kv_stats() {
  throw Error(cat("the ", name(), " backend collects no KV statistics (loom calibrate)"));
}

}  // namespace loom
