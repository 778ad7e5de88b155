#include "engine/kv_cache.h"

#include <cstring>

#include "core/error.h"
#include "core/fnv.h"

namespace loom {

KvCache::KvCache(int num_blocks, int block_size)
    : num_blocks_(num_blocks), block_size_(block_size), blocks_(size_t(num_blocks)) {
  LOOM_CHECK(num_blocks > 0 && block_size > 0, "KV cache needs blocks: ", num_blocks, " of ",
             block_size, " slots");
  for (int b = 0; b < num_blocks; b++) blocks_[size_t(b)].lru = free_.insert(free_.end(), b);
}

int KvCache::allocate() {
  LOOM_CHECK(!free_.empty(), "KV cache: out of blocks (", num_blocks_, " in all)");
  const int b = free_.front();
  free_.pop_front();
  Block& blk = blocks_[size_t(b)];
  forget_hash(b);
  blk.refs = 1;
  blk.ready = false;
  used_++;
  if (used_ > peak_used_) peak_used_ = used_;
  return b;
}

void KvCache::add_ref(int block) {
  Block& blk = blocks_[size_t(block)];
  if (blk.refs == 0) {  // a cached block comes back into use
    free_.erase(blk.lru);
    used_++;
    if (used_ > peak_used_) peak_used_ = used_;
  }
  blk.refs++;
}

void KvCache::release(int block) {
  Block& blk = blocks_[size_t(block)];
  LOOM_CHECK(blk.refs > 0, "KV cache: block ", block, " released more often than referenced");
  if (--blk.refs > 0) return;
  used_--;
  if (!blk.ready)
    forget_hash(block);  // never written in full: its content is not what the hash says
  // Cached blocks go to the back (evicted last); plain ones to the front (reused first).
  blk.lru = blk.hashed ? free_.insert(free_.end(), block) : free_.insert(free_.begin(), block);
}

int KvCache::lookup(uint64_t hash) const {
  auto it = by_hash_.find(hash);
  return it == by_hash_.end() ? -1 : it->second;
}

void KvCache::register_hash(int block, uint64_t hash) {
  Block& blk = blocks_[size_t(block)];
  if (by_hash_.count(hash)) return;  // another block already holds this content
  forget_hash(block);
  blk.hashed = true;
  blk.hash = hash;
  by_hash_[hash] = block;
}

void KvCache::forget_hash(int block) {
  Block& blk = blocks_[size_t(block)];
  if (!blk.hashed) return;
  auto it = by_hash_.find(blk.hash);
  if (it != by_hash_.end() && it->second == block) by_hash_.erase(it);
  blk.hashed = false;
}

void KvCache::check_invariants() const {
  int used = 0;
  std::vector<char> in_free(size_t(num_blocks_), 0);
  for (int b : free_) {
    LOOM_CHECK(!in_free[size_t(b)], "KV invariant: block ", b, " twice in the free list");
    in_free[size_t(b)] = 1;
  }
  for (int b = 0; b < num_blocks_; b++) {
    const Block& blk = blocks_[size_t(b)];
    LOOM_CHECK(blk.refs >= 0, "KV invariant: block ", b, " has ", blk.refs, " references");
    LOOM_CHECK((blk.refs == 0) == bool(in_free[size_t(b)]), "KV invariant: block ", b, " has ",
               blk.refs, " references but is", in_free[size_t(b)] ? "" : " not", " free");
    if (blk.refs > 0) used++;
  }
  LOOM_CHECK(used == used_, "KV invariant: ", used, " blocks referenced, counter says ", used_);
  for (const auto& [hash, b] : by_hash_)
    LOOM_CHECK(blocks_[size_t(b)].hashed && blocks_[size_t(b)].hash == hash,
               "KV invariant: hash map points at block ", b, " that does not carry it");
}

uint64_t hash_block(uint64_t parent, const int32_t* tokens, const float* actions, int slots,
                    int action_dim) {
  uint64_t h = kFnvOffset ^ parent;
  auto mix = [&h](uint32_t v) {
    for (int i = 0; i < 4; i++) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= kFnvPrime;
    }
  };
  mix(uint32_t(parent >> 32));
  mix(uint32_t(parent));
  for (int s = 0; s < slots; s++) {
    mix(uint32_t(tokens[s]));
    if (tokens[s] < 0 && actions != nullptr)
      for (int d = 0; d < action_dim; d++) {
        uint32_t bits;
        std::memcpy(&bits, &actions[size_t(s) * size_t(action_dim) + size_t(d)], 4);
        mix(bits);
      }
  }
  return h;
}

}  // namespace loom
