// The norm family (kernels/norm.h): rms_norm_residual and layer_norm_residual against their fp32
// references over odd sizes (rows 1, 3, 19; dim 1, 3, 19, 99, 2053 and Terra's 2048), f32 (rel.
// error ≤ 1e-5) and bf16 (≤ 1e-2, delta rounded to bf16 for the reference), with the residual
// add, with selected rows (the final norm) and, for LayerNorm, with and without weight and bias.
// Outputs are poisoned with NaN before each run. The references' fixed values: ops/norm_ref.h.
// rms_norm_residual's launch shapes (norm.cu) get dims of their own: 8, 64, 96 (a warp a row,
// several rows a block), 2056 and 8200 (vectors in both dtypes, a block's last warp part full,
// 2 and 4 vectors a thread), 4100 (vectors in fp32 only); a misaligned out (the scalar kernel at
// a vector dim); and row invariance, bitwise: each row of a 19-row run equals that row run
// alone.
#include <doctest/doctest.h>

#include "cuda/cuda_test_util.h"
#include "kernels/layer_norm.cuh"
#include "kernels/norm.cuh"
#include "ops/norm_ref.h"

using namespace loom;
using namespace loom::test;

namespace {

enum class Kind { Rms, LayerAffineBias, LayerAffine, LayerPlain };

void check_norm(Kind kind, DType t, int rows, int dim) {
  CAPTURE(int(kind));
  CAPTURE(dtype_name(t));
  CAPTURE(rows);
  CAPTURE(dim);
  const size_t n = size_t(rows) * dim;
  // An offset mean: LayerNorm must subtract it (RMSNorm would not).
  const std::vector<float> x = random_vec(n, 11, 0.5f, 3.0f);
  std::vector<float> delta = random_vec(n, 12);
  if (t == DType::BF16) delta = round_bf16(delta);
  const std::vector<float> w = random_vec(size_t(dim), 13, 0.5f, 1.5f);
  const std::vector<float> b = random_vec(size_t(dim), 14, -0.5f, 0.5f);
  const bool use_w = kind != Kind::LayerPlain, use_b = kind == Kind::LayerAffineBias;
  const float eps = kind == Kind::Rms ? 1e-6f : 1e-5f;
  auto run_ref = [&](NormArgs a) {
    a.t = DType::F32;
    kind == Kind::Rms ? cpu::rms_norm_residual(a) : cpu::layer_norm_residual(a);
  };
  auto run_gpu = [&](const NormArgs& a) {
    LOOM_KERNEL(kind == Kind::Rms ? gpu::rms_norm_residual(a, nullptr)
                                  : gpu::layer_norm_residual(a, nullptr));
  };

  // All rows with the residual add.
  std::vector<float> ref_x = x, ref(n);
  run_ref({DType::F32, ref_x.data(), delta.data(), use_w ? w.data() : nullptr,
           use_b ? b.data() : nullptr, nullptr, rows, dim, eps, ref.data()});
  DevBuf dx = upload(x, DType::F32), dd = upload(delta, t), dw = upload(w, DType::F32),
         db = upload(b, DType::F32), out(n * 4);
  out.poison();
  run_gpu({t, dx.as<float>(), dd.get(), use_w ? dw.as<float>() : nullptr,
           use_b ? db.as<float>() : nullptr, nullptr, rows, dim, eps, out.get()});
  // dim 1 LayerNorm: every output is the bias (or 0); rel_err of a zero reference is absolute.
  CHECK(rel_err(download(out, n, t), ref) < tolerance(t));
  CHECK(rel_err(download(dx, n, DType::F32), ref_x) < 1e-6);

  // Selected rows, no delta (the final norm): out row r is x row sel[r].
  const std::vector<int32_t> sel = {rows - 1, 0};
  std::vector<float> ref2(2 * size_t(dim));
  run_ref({DType::F32, ref_x.data(), nullptr, use_w ? w.data() : nullptr,
           use_b ? b.data() : nullptr, sel.data(), 2, dim, eps, ref2.data()});
  DevBuf dsel = upload_ints(sel), out2(2 * size_t(dim) * 4);
  out2.poison();
  run_gpu({t, dx.as<float>(), nullptr, use_w ? dw.as<float>() : nullptr,
           use_b ? db.as<float>() : nullptr, dsel.as<int32_t>(), 2, dim, eps, out2.get()});
  CHECK(rel_err(download(out2, ref2.size(), t), ref2) < tolerance(t));
}

}  // namespace

TEST_CASE("rms_norm_residual and layer_norm_residual match their references") {
  for (Kind kind : {Kind::Rms, Kind::LayerAffineBias, Kind::LayerAffine, Kind::LayerPlain})
    for (DType t : {DType::F32, DType::BF16})
      for (int rows : {1, 3, 19})
        for (int dim : {1, 3, 8, 19, 64, 96, 99, 2048, 2053, 2056, 4100, 8200})
          check_norm(kind, t, rows, dim);
}

TEST_CASE("rms_norm_residual with a misaligned out takes the scalar kernel, same values") {
  for (DType t : {DType::F32, DType::BF16}) {
    CAPTURE(dtype_name(t));
    const int rows = 3, dim = 2048;
    const size_t n = size_t(rows) * dim, ts = dtype_size(t);
    const std::vector<float> x = random_vec(n, 11, 0.5f, 3.0f), w = random_vec(dim, 13);
    std::vector<float> ref_x = x, ref(n);
    cpu::rms_norm_residual({DType::F32, ref_x.data(), nullptr, w.data(), nullptr, nullptr, rows,
                            dim, 1e-6f, ref.data()});
    DevBuf dx = upload(x, DType::F32), dw = upload(w, DType::F32), out((n + 1) * ts);
    out.poison();
    void* out1 = static_cast<char*>(out.get()) + ts;  // one element in: not 16-byte aligned
    LOOM_KERNEL(gpu::rms_norm_residual(
        {t, dx.as<float>(), nullptr, dw.as<float>(), nullptr, nullptr, rows, dim, 1e-6f, out1},
        nullptr));
    std::vector<float> got = download(out, n + 1, t);
    got.erase(got.begin());
    CHECK(rel_err(got, ref) < tolerance(t));
  }
}

TEST_CASE("rms_norm_residual gives a row the same bits alone and among 19 rows") {
  for (DType t : {DType::F32, DType::BF16})
    for (int dim : {64, 2048, 2053, 8200}) {
      CAPTURE(dtype_name(t));
      CAPTURE(dim);
      const int rows = 19;
      const size_t n = size_t(rows) * dim, ts = dtype_size(t);
      const std::vector<float> x = random_vec(n, 41, -2.0f, 2.0f), delta = random_vec(n, 42),
                               w = random_vec(size_t(dim), 43, 0.5f, 1.5f);
      DevBuf dw = upload(w, DType::F32), dd = upload(delta, t);
      // All rows at once, with the residual add.
      DevBuf dx_all = upload(x, DType::F32), out_all(n * ts);
      LOOM_KERNEL(gpu::rms_norm_residual({t, dx_all.as<float>(), dd.get(), dw.as<float>(), nullptr,
                                          nullptr, rows, dim, 1e-6f, out_all.get()},
                                         nullptr));
      // Each row alone (selected, so the residual add reaches its own row of x).
      std::vector<int32_t> each(rows);
      for (int r = 0; r < rows; r++) each[size_t(r)] = r;
      DevBuf dx_one = upload(x, DType::F32), out_one(n * ts), sel = upload_ints(each);
      for (int r = 0; r < rows; r++) {
        LOOM_KERNEL(gpu::rms_norm_residual(
            {t, dx_one.as<float>(), dd.get(), dw.as<float>(), nullptr, sel.as<int32_t>() + r, 1,
             dim, 1e-6f, static_cast<char*>(out_one.get()) + size_t(r) * dim * ts},
            nullptr));
      }
      std::vector<char> a(n * ts), b(n * ts), xa(n * 4), xb(n * 4);
      LOOM_CUDA_CHECK(cudaMemcpy(a.data(), out_all.get(), a.size(), cudaMemcpyDeviceToHost));
      LOOM_CUDA_CHECK(cudaMemcpy(b.data(), out_one.get(), b.size(), cudaMemcpyDeviceToHost));
      LOOM_CUDA_CHECK(cudaMemcpy(xa.data(), dx_all.get(), xa.size(), cudaMemcpyDeviceToHost));
      LOOM_CUDA_CHECK(cudaMemcpy(xb.data(), dx_one.get(), xb.size(), cudaMemcpyDeviceToHost));
      CHECK(a == b);
      CHECK(xa == xb);
    }
}

TEST_CASE("the norm launchers refuse what they cannot run, naming it") {
  float* x = nullptr;
  NormArgs a{DType::F16, x, nullptr, nullptr, nullptr, nullptr, 1, 4, 1e-6f, nullptr};
  float dummy[4];
  a.x = dummy;
  a.weight = dummy;
  a.out = dummy;
  const gpu::Status s = gpu::rms_norm_residual(a, nullptr);
  CHECK_FALSE(s.ok);
  CHECK(s.message == "rms_norm_residual: dtype f16 (expected f32 or bf16)");
  a.t = DType::F32;
  a.bias = dummy;
  CHECK(gpu::rms_norm_residual(a, nullptr).message == "rms_norm_residual: RMSNorm takes no bias");
  a.dim = 0;
  CHECK_FALSE(gpu::layer_norm_residual(a, nullptr).ok);
}
