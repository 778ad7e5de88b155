#include "backend/cpu/ops.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace loom::cpu {

void matmul_nt(const float* x, const float* w, const float* bias, float* y, int m, int n, int k) {
  for (int i = 0; i < m; i++) {
    const float* xi = x + size_t(i) * size_t(k);
    for (int j = 0; j < n; j++) {
      const float* wj = w + size_t(j) * size_t(k);
      float acc = 0.0f;
      for (int t = 0; t < k; t++) acc += xi[t] * wj[t];
      y[size_t(i) * size_t(n) + size_t(j)] = acc + (bias ? bias[j] : 0.0f);
    }
  }
}

void rope(float* x, const int32_t* positions, int rows, int heads, int head_dim, float theta) {
  const int half = head_dim / 2;
  std::vector<float> inv_freq(static_cast<size_t>(half));  // [head_dim / 2]
  for (int j = 0; j < half; j++)
    inv_freq[size_t(j)] = 1.0f / std::pow(theta, float(2 * j) / float(head_dim));
  for (int r = 0; r < rows; r++) {
    for (int j = 0; j < half; j++) {
      const float angle = float(positions[r]) * inv_freq[size_t(j)];
      const float c = std::cos(angle), s = std::sin(angle);
      for (int h = 0; h < heads; h++) {
        float* v = x + (size_t(r) * size_t(heads) + size_t(h)) * size_t(head_dim);
        const float a = v[j], b = v[j + half];
        v[j] = a * c - b * s;
        v[j + half] = b * c + a * s;
      }
    }
  }
}

// Offset of cache index `i` of a sequence in a [num_blocks, block_size, kv_heads, head_dim] pool.
static size_t cache_offset(const int32_t* block_table, int i, int block_size, int kv_heads,
                           int head_dim) {
  const size_t block = size_t(block_table[i / block_size]);
  return ((block * size_t(block_size) + size_t(i % block_size)) * size_t(kv_heads)) *
         size_t(head_dim);
}

void kv_write(const float* k, const float* v, float* k_cache, float* v_cache,
              const int32_t* block_table, int kv_len, int n_new, int kv_heads, int head_dim,
              int block_size) {
  const size_t row = size_t(kv_heads) * size_t(head_dim);
  for (int j = 0; j < n_new; j++) {
    const size_t off = cache_offset(block_table, kv_len + j, block_size, kv_heads, head_dim);
    std::copy(k + size_t(j) * row, k + size_t(j + 1) * row, k_cache + off);
    std::copy(v + size_t(j) * row, v + size_t(j + 1) * row, v_cache + off);
  }
}

void paged_attention(const float* q, const float* k_cache, const float* v_cache,
                     const int32_t* block_table, int kv_len, int n_new, int heads, int kv_heads,
                     int head_dim, int block_size, float* out) {
  const int group = heads / kv_heads;
  const float scale = 1.0f / std::sqrt(float(head_dim));
  std::vector<float> score(static_cast<size_t>(kv_len + n_new));  // [visible cache indices]
  for (int j = 0; j < n_new; j++) {
    const int visible = kv_len + j + 1;
    for (int h = 0; h < heads; h++) {
      const int kvh = h / group;
      const float* qv = q + (size_t(j) * size_t(heads) + size_t(h)) * size_t(head_dim);
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

}  // namespace loom::cpu
