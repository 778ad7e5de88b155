// fp32 reference of rms_norm_residual (norm.h). HF LlamaRMSNorm: the sum of squares in fp32, one
// scale per row, weight · (x · scale).
#include <cmath>

#include "core/error.h"
#include "kernels/norm.h"

namespace loom::cpu {

float* residual_row(const NormArgs& a, int r, const char* op) {
  LOOM_CHECK(a.t == DType::F32, op, ": dtype ", dtype_name(a.t), " (the reference is fp32)");
  const size_t dim = size_t(a.dim), src = size_t(a.rows ? a.rows[r] : r);
  float* xr = a.x + src * dim;
  if (a.delta) {
    const float* d = static_cast<const float*>(a.delta) + src * dim;
    for (size_t i = 0; i < dim; i++) xr[i] += d[i];
  }
  return xr;
}

void rms_norm_residual(const NormArgs& a) {
  LOOM_CHECK(a.x && a.weight && a.out && !a.bias, "cpu::rms_norm_residual: null x/weight/out");
  const size_t dim = size_t(a.dim);
  for (int r = 0; r < a.n_rows; r++) {
    const float* xr = residual_row(a, r, "cpu::rms_norm_residual");
    float ss = 0.0f;
    for (size_t i = 0; i < dim; i++) ss += xr[i] * xr[i];
    const float scale = 1.0f / std::sqrt(ss / float(a.dim) + a.eps);
    float* yr = static_cast<float*>(a.out) + size_t(r) * dim;
    for (size_t i = 0; i < dim; i++) yr[i] = a.weight[i] * (xr[i] * scale);
  }
}

}  // namespace loom::cpu
