// The mlp_activation family (kernels/mlp_activation.h): bias_activation (the bias add alone;
// silu, gelu_tanh, gelu, relu with and without a bias) and act_mul (every activation; SwiGLU is
// act_mul with silu) against their fp32 references over odd sizes (rows 1, 3, 19; widths 1, 3,
// 19, 99, 2053 and Terra's 5632), f32 (rel. error ≤ 1e-5) and bf16 (≤ 1e-2, inputs rounded to
// bf16 for the reference). Outputs are poisoned with NaN before each run. The references' fixed
// values: ops/mlp_activation_ref.h. The kernels' two paths (mlp_activation.cu) get widths of
// their own: 8 and 160 (16-byte vectors in both dtypes, less than a block), 4100 (vectors in
// fp32 only), a misaligned output (the scalar kernel at a vector width) and 70000 rows (more
// than the grid's 65535 in y).
#include <doctest/doctest.h>

#include "cuda/cuda_test_util.h"
#include "kernels/mlp_activation.cuh"
#include "ops/mlp_activation_ref.h"

using namespace loom;
using namespace loom::test;

namespace {

const DType kTypes[] = {DType::F32, DType::BF16};
const int kWidths[] = {1, 3, 8, 19, 99, 160, 2053, 4100, 5632};
const Activation kActs[] = {Activation::Silu, Activation::GeluTanh, Activation::Gelu,
                            Activation::Relu};
const char* const kActNames[] = {"silu", "gelu_tanh", "gelu", "relu"};

std::vector<float> as_t(std::vector<float> v, DType t) {
  return t == DType::BF16 ? round_bf16(std::move(v)) : v;
}

}  // namespace

TEST_CASE("bias_activation matches cpu::bias_activation") {
  for (DType t : kTypes)
    for (int rows : {1, 3, 19})
      for (int n : kWidths)
        for (int a = -1; a < 4; a++)  // -1: the bias add alone
          for (bool with_bias : {true, false}) {
            if (a < 0 && !with_bias) continue;
            CAPTURE(dtype_name(t));
            CAPTURE(rows);
            CAPTURE(n);
            CAPTURE(a < 0 ? "none" : kActNames[a]);
            CAPTURE(with_bias);
            const size_t total = size_t(rows) * n;
            const std::vector<float> y = as_t(random_vec(total, 21, -4, 4), t);
            const std::vector<float> bias = random_vec(size_t(n), 22);
            std::vector<float> ref = y;
            const Activation act = a >= 0 ? kActs[a] : Activation::Silu;
            cpu::bias_activation(
                {DType::F32, ref.data(), with_bias ? bias.data() : nullptr, rows, n, a >= 0, act});
            DevBuf dy = upload(y, t), db = upload(bias, DType::F32);
            LOOM_KERNEL(gpu::bias_activation(
                {t, dy.get(), with_bias ? db.as<float>() : nullptr, rows, n, a >= 0, act},
                nullptr));
            CHECK(rel_err(download(dy, total, t), ref) < tolerance(t));
          }
}

TEST_CASE("act_mul matches cpu::act_mul for every activation") {
  for (DType t : kTypes)
    for (int rows : {1, 3, 19})
      for (int inter : kWidths)
        for (int a = 0; a < 4; a++) {
          CAPTURE(dtype_name(t));
          CAPTURE(rows);
          CAPTURE(inter);
          CAPTURE(kActNames[a]);
          const std::vector<float> gu = as_t(random_vec(size_t(rows) * 2 * inter, 31, -4, 4), t);
          std::vector<float> ref(size_t(rows) * inter);
          cpu::act_mul({DType::F32, gu.data(), ref.data(), rows, inter, kActs[a]});
          DevBuf dg = upload(gu, t), out(ref.size() * 4);
          out.poison();
          LOOM_KERNEL(gpu::act_mul({t, dg.get(), out.get(), rows, inter, kActs[a]}, nullptr));
          CHECK(rel_err(download(out, ref.size(), t), ref) < tolerance(t));
        }
}

TEST_CASE("act_mul and bias_activation with a misaligned output or 70000 rows") {
  struct Shape {
    int rows, width, offset;  // offset: elements the output starts past its allocation
  };
  for (DType t : kTypes)
    for (Shape sh : {Shape{3, 5632, 1}, Shape{70000, 8, 0}, Shape{70000, 3, 0}}) {
      CAPTURE(dtype_name(t));
      CAPTURE(sh.rows);
      CAPTURE(sh.width);
      CAPTURE(sh.offset);
      const size_t n = size_t(sh.rows) * sh.width, ts = dtype_size(t), off = size_t(sh.offset);
      const std::vector<float> gu = as_t(random_vec(2 * n, 51, -4, 4), t);
      std::vector<float> ref(n);
      cpu::act_mul({DType::F32, gu.data(), ref.data(), sh.rows, sh.width, Activation::Silu});
      DevBuf dg = upload(gu, t), out((n + off) * ts);
      out.poison();
      void* o = static_cast<char*>(out.get()) + off * ts;
      LOOM_KERNEL(gpu::act_mul({t, dg.get(), o, sh.rows, sh.width, Activation::Silu}, nullptr));
      std::vector<float> got = download(out, n + off, t);
      got.erase(got.begin(), got.begin() + ptrdiff_t(off));
      CHECK(rel_err(got, ref) < tolerance(t));

      // bias_activation in place on y placed the same way.
      const std::vector<float> y = as_t(random_vec(n, 52, -4, 4), t);
      const std::vector<float> bias = random_vec(size_t(sh.width), 53);
      std::vector<float> yref = y;
      cpu::bias_activation(
          {DType::F32, yref.data(), bias.data(), sh.rows, sh.width, true, Activation::GeluTanh});
      std::vector<float> padded(off, 0.0f);
      padded.insert(padded.end(), y.begin(), y.end());
      DevBuf dy = upload(padded, t), db = upload(bias, DType::F32);
      void* yp = static_cast<char*>(dy.get()) + off * ts;
      LOOM_KERNEL(gpu::bias_activation(
          {t, yp, db.as<float>(), sh.rows, sh.width, true, Activation::GeluTanh}, nullptr));
      got = download(dy, n + off, t);
      got.erase(got.begin(), got.begin() + ptrdiff_t(off));
      CHECK(rel_err(got, yref) < tolerance(t));
    }
}
