// KvCache: the engine's view of the paged KV pool (design §5). It owns block ids, reference
// counts and content hashes; the backend owns the memory the ids index. A full block of a
// round's prompt is registered under a chained hash (parent hash, token ids, action values) so
// later sequences with the same prefix (other samples of a job, jobs with the same context
// frames) take a reference instead of recomputing it. A block whose writer has not run yet is
// shared but not ready; the scheduler holds its sharers back until it is.
//
// Blocks are taken as sequences grow; when they run out the scheduler preempts (engine/
// scheduler.h). Freed blocks that carry a hash stay findable until the allocator needs them
// (LRU eviction).
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

namespace loom {

class KvCache {
 public:
  KvCache(int num_blocks, int block_size);

  int num_blocks() const { return num_blocks_; }
  int block_size() const { return block_size_; }

  // A fresh block with one reference; evicts the least recently freed cached block if needed.
  int allocate();
  void add_ref(int block);
  void release(int block);  // drops one reference; at zero the block becomes free (or cached)

  // Prefix sharing. lookup() returns the block holding exactly this content, or -1.
  int lookup(uint64_t hash) const;
  void register_hash(int block, uint64_t hash);  // content of `block` will be `hash`
  void set_ready(int block) { blocks_[size_t(block)].ready = true; }
  bool ready(int block) const { return blocks_[size_t(block)].ready; }
  int ref_count(int block) const { return blocks_[size_t(block)].refs; }

  int used_blocks() const { return used_; }  // blocks with at least one reference
  int peak_used_blocks() const { return peak_used_; }
  int free_blocks() const { return num_blocks_ - used_; }

  // Checks every internal invariant (tests): ref counts ≥ 0, free list ∪ used = all blocks,
  // hash map points at blocks carrying that hash. Throws loom::Error naming the first violation.
  void check_invariants() const;

 private:
  struct Block {
    int refs = 0;
    bool ready = false;
    bool hashed = false;
    uint64_t hash = 0;
    std::list<int>::iterator lru;  // position in free_ when refs == 0
  };
  void forget_hash(int block);

  int num_blocks_, block_size_;
  int used_ = 0, peak_used_ = 0;
  std::vector<Block> blocks_;                  // [num_blocks]
  std::list<int> free_;                        // unreferenced blocks, least recently freed first
  std::unordered_map<uint64_t, int> by_hash_;  // content hash → block
};

// Chained content hash of one block (FNV-1a over the parent hash, token ids and action bits).
uint64_t hash_block(uint64_t parent, const int32_t* tokens, const float* actions, int slots,
                    int action_dim);

}  // namespace loom
