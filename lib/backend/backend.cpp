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

void Backend::submit(const StepBatch& batch) {
  LOOM_CHECK(submitted_.size() < 2, "backend: a third step submitted before one was collected");
  const StepBatch* b = &batch;
  StepBatch resolved;
  for (size_t i = 0; i < batch.tokens.size(); i++) {
    const int k = future_index(batch.tokens[i]);
    if (k < 0) continue;
    if (b == &batch) {
      resolved = batch;
      b = &resolved;
    }
    LOOM_CHECK(size_t(k) < last_draws_.size() && last_draws_[size_t(k)] >= 0, "step: slot ", i,
               " takes the draw of sequence ", k, " of the previous step, which drew none");
    resolved.tokens[i] = last_draws_[size_t(k)];
  }
  StepOutput out;
  step(*b, out);
  last_draws_ = out.tokens;
  submitted_.push_back(std::move(out));
}

void Backend::collect(StepOutput& out) {
  LOOM_CHECK(!submitted_.empty(), "backend: collect without a submitted step");
  out = std::move(submitted_.front());
  submitted_.erase(submitted_.begin());
}

void Backend::collect_kv_stats(const KvScales*) {
  throw Error(cat("the ", name(), " backend collects no KV statistics (loom calibrate)"));
}
KvStats Backend::kv_stats() {
  throw Error(cat("the ", name(), " backend collects no KV statistics (loom calibrate)"));
}

}  // namespace loom
