#include "backend/backend.h"

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

}  // namespace loom
