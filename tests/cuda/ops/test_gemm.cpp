// The linear layer on cuBLAS (backend/cuda/gemm.h) against cpu::matmul_nt on odd sizes (m 1, 3,
// 19; n 19 and 1000), f32 and bf16 (operands rounded to bf16 for the reference), with the
// operands' dtype out and fp32 out (the lm_head path). Outputs are poisoned with NaN before each
// run. The reference's fixed values: ops/linear_ref.h. (gemv_bf16: test_gemv.cpp; linear_fixed:
// tests/cuda/test_batch_invariance.cpp.)
#include <doctest/doctest.h>

#include "backend/cuda/gemm.h"
#include "cuda/cuda_test_util.h"
#include "ops/linear_ref.h"

using namespace loom;
using namespace loom::test;

static const DType kTypes[] = {DType::F32, DType::BF16};

TEST_CASE("cuBLAS gemm matches cpu::matmul_nt") {
  gpu::Gemm gemm;
  gemm.init(nullptr);
  for (DType t : kTypes)
    for (int m : {1, 3, 19})
      for (auto [n, k] : {std::pair{19, 96}, std::pair{1000, 2048}}) {
        CAPTURE(dtype_name(t));
        CAPTURE(m);
        CAPTURE(n);
        std::vector<float> x = random_vec(size_t(m) * k, 5), w = random_vec(size_t(n) * k, 6);
        if (t == DType::BF16) x = round_bf16(x), w = round_bf16(w);
        std::vector<float> ref(size_t(m) * n);
        cpu::matmul_nt(x.data(), w.data(), nullptr, ref.data(), m, n, k);
        DevBuf dx = upload(x, t), dw = upload(w, t), out(ref.size() * 4);
        out.poison();
        gemm.run(t, dx.get(), dw.get(), t, out.get(), m, n, k);
        CHECK(rel_err(download(out, ref.size(), t), ref) < tolerance(t));
        out.poison();  // fp32 output from bf16 operands (the lm_head path)
        gemm.run(t, dx.get(), dw.get(), DType::F32, out.get(), m, n, k);
        CHECK(rel_err(download(out, ref.size(), DType::F32), ref) <
              (t == DType::F32 ? 1e-5 : 1e-5));
      }
}
