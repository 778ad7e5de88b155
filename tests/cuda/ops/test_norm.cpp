// The norm family (kernels/norm.h): rms_norm_residual and layer_norm_residual against their fp32
// references over odd sizes (rows 1, 3, 19; dim 1, 3, 19, 99, 2053 and Terra's 2048), f32 (rel.
// error ≤ 1e-5) and bf16 (≤ 1e-2, delta rounded to bf16 for the reference), with the residual
// add, with selected rows (the final norm) and, for LayerNorm, with and without weight and bias.
// Outputs are poisoned with NaN before each run. The references' fixed values: ops/norm_ref.h.
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
        for (int dim : {1, 3, 19, 99, 2048, 2053}) check_norm(kind, t, rows, dim);
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
