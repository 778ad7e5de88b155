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

}  // namespace loom::cpu
