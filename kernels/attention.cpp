// fp32 reference of paged_attention (attention.h).
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "kernels/attention.h"

namespace loom::cpu {

namespace {

// Offset of cache index `i` of a sequence in a [num_blocks, block_size, kv_heads, head_dim] pool.
size_t cache_offset(const int32_t* block_table, int i, int block_size, int kv_heads, int head_dim) {
  const size_t block = size_t(block_table[i / block_size]);
  return ((block * size_t(block_size) + size_t(i % block_size)) * size_t(kv_heads)) *
         size_t(head_dim);
}

}  // namespace

void attend_sequence(const float* q, int q_stride, const float* k_cache, const float* v_cache,
                     const int32_t* block_table, int kv_len, int n_new, int heads, int kv_heads,
                     int head_dim, int block_size, float* out) {
  const int group = heads / kv_heads;
  const float scale = 1.0f / std::sqrt(float(head_dim));
  std::vector<float> score(static_cast<size_t>(kv_len + n_new));  // [visible cache indices]
  for (int j = 0; j < n_new; j++) {
    const int visible = kv_len + j + 1;
    for (int h = 0; h < heads; h++) {
      const int kvh = h / group;
      const float* qv = q + size_t(j) * size_t(q_stride) + size_t(h) * size_t(head_dim);
      float mx = -INFINITY;
      for (int i = 0; i < visible; i++) {
        const float* kv = k_cache + cache_offset(block_table, i, block_size, kv_heads, head_dim) +
                          size_t(kvh) * size_t(head_dim);
        float dot = 0.0f;
        for (int d = 0; d < head_dim; d++) dot += qv[d] * kv[d];
        score[size_t(i)] = dot * scale;
        mx = std::max(mx, score[size_t(i)]);
      }
      float sum = 0.0f;
      for (int i = 0; i < visible; i++) {
        score[size_t(i)] = std::exp(score[size_t(i)] - mx);
        sum += score[size_t(i)];
      }
      float* o = out + (size_t(j) * size_t(heads) + size_t(h)) * size_t(head_dim);
      std::fill(o, o + head_dim, 0.0f);
      for (int i = 0; i < visible; i++) {
        const float* vv = v_cache + cache_offset(block_table, i, block_size, kv_heads, head_dim) +
                          size_t(kvh) * size_t(head_dim);
        const float p = score[size_t(i)] / sum;
        for (int d = 0; d < head_dim; d++) o[d] += p * vv[d];
      }
    }
  }
}

void paged_attention(const AttentionArgs& a) {
  LOOM_CHECK(a.t == DType::F32, "cpu::paged_attention: dtype ", dtype_name(a.t),
             " (the reference is fp32)");
  LOOM_CHECK(a.qkv && a.k_cache && a.v_cache && a.block_tables && a.kv_len && a.slot_start &&
                 a.tiles && a.out,
             "cpu::paged_attention: null pointer");
  LOOM_CHECK(a.heads > 0 && a.kv_heads > 0 && a.heads % a.kv_heads == 0,
             "cpu::paged_attention: heads ", a.heads, " not a multiple of kv_heads ", a.kv_heads);
  const int D = a.head_dim, row = (a.heads + 2 * a.kv_heads) * D;
  for (int t = 0; t < a.n_tiles; t++) {
    const int seq = a.tiles[3 * t], j0 = a.tiles[3 * t + 1], nj = a.tiles[3 * t + 2];
    const int slot = a.slot_start[seq] + j0;
    attend_sequence(static_cast<const float*>(a.qkv) + size_t(slot) * row, row,
                    static_cast<const float*>(a.k_cache), static_cast<const float*>(a.v_cache),
                    a.block_tables + size_t(seq) * a.bt_stride, a.kv_len[seq] + j0, nj, a.heads,
                    a.kv_heads, D, a.block_size,
                    static_cast<float*>(a.out) + size_t(slot) * a.heads * D);
  }
}

}  // namespace loom::cpu
