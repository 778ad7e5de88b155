// fp32 reference of layer_norm_residual (norm.h): torch nn.LayerNorm, mean then the biased
// variance of the centred values, in fp32.
#include <cmath>

#include "core/error.h"
#include "kernels/norm.h"

namespace loom::cpu {

void layer_norm_residual(const NormArgs& a) {
  LOOM_CHECK(a.x && a.out, "cpu::layer_norm_residual: null x/out");
  const size_t dim = size_t(a.dim);
  for (int r = 0; r < a.n_rows; r++) {
    const float* xr = residual_row(a, r, "cpu::layer_norm_residual");
    float mean = 0.0f;
    for (size_t i = 0; i < dim; i++) mean += xr[i];
    mean /= float(a.dim);
    float var = 0.0f;
    for (size_t i = 0; i < dim; i++) var += (xr[i] - mean) * (xr[i] - mean);
    const float scale = 1.0f / std::sqrt(var / float(a.dim) + a.eps);
    float* yr = static_cast<float*>(a.out) + size_t(r) * dim;
    for (size_t i = 0; i < dim; i++) {
      const float v = (xr[i] - mean) * scale;
      yr[i] = (a.weight ? v * a.weight[i] : v) + (a.bias ? a.bias[i] : 0.0f);
    }
  }
}

}  // namespace loom::cpu
