// The GEMV family (kernels/gemv.cuh): gemv_bf16 with each fused input (plain, RMSNorm, SwiGLU)
// and output (bf16, fp32 accumulate into the residual, fp32 logits with padded rows) against the
// references it fuses (cpu::rms_norm_residual, cpu::act_mul with silu, cpu::matmul_nt) on odd
// sizes, and a decode-like chain of GEMVs under programmatic dependent launch, eager and as a
// graph. Outputs are poisoned with NaN before each run.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "backend/cpu/ops.h"
#include "cuda/cuda_test_util.h"
#include "kernels/attention.cuh"
#include "kernels/gemv.cuh"

using namespace loom;
using namespace loom::gpu;
using namespace loom::test;

namespace {

// y = RMSNorm of one fp32 row x [dim] with weight w (eps 1e-6), by the reference.
void rms_norm_row(const float* x, const float* w, float* y, int dim) {
  std::vector<float> row(x, x + dim);
  cpu::rms_norm_residual({DType::F32, row.data(), nullptr, w, nullptr, nullptr, 1, dim, 1e-6f, y});
}

// out [rows, inter] = silu(gate) · up of gate_up [rows, 2 inter], by the reference.
void silu_mul(const float* gate_up, float* out, int rows, int inter) {
  cpu::act_mul({DType::F32, gate_up, out, rows, inter, Activation::Silu});
}

// The elements of a [rows, cols] result farthest from the reference, "[row, col] got X expected
// Y", and the count of non-finite values: what a failing check prints.
std::string worst_elements(const std::vector<float>& got, const std::vector<float>& ref, int cols) {
  std::vector<size_t> idx(ref.size());
  std::iota(idx.begin(), idx.end(), size_t(0));
  auto diff = [&](size_t i) {
    const double d = std::fabs(double(got[i]) - double(ref[i]));
    return std::isfinite(d) ? d : double(INFINITY);
  };
  const size_t show = std::min<size_t>(3, idx.size());
  std::partial_sort(idx.begin(), idx.begin() + show, idx.end(),
                    [&](size_t a, size_t b) { return diff(a) > diff(b); });
  std::string s;
  for (size_t j = 0; j < show; j++) {
    const size_t i = idx[j];
    s += "[" + std::to_string(i / size_t(cols)) + ", " + std::to_string(i % size_t(cols)) +
         "] got " + std::to_string(got[i]) + " expected " + std::to_string(ref[i]) + "; ";
  }
  size_t bad = 0;
  for (float v : got) bad += std::isfinite(v) ? 0 : 1;
  return s + std::to_string(bad) + " of " + std::to_string(got.size()) + " non-finite";
}

// rows [rows, ld] → [rows, cols] (drops the padding columns).
std::vector<float> unpad(const std::vector<float>& v, int rows, int cols, int ld) {
  std::vector<float> r(size_t(rows) * cols);
  for (int i = 0; i < rows; i++)
    std::copy_n(v.begin() + size_t(i) * ld, cols, r.begin() + size_t(i) * cols);
  return r;
}

}  // namespace

// Every fused input with every output it is used with, both kernels, m = 1..16 (the FMA kernel
// is built for 1, 2, 4 and 8 rows, the tensor-core one for 8 and 16; the others leave zero
// rows), odd n (a partial last group of eight rows), k with a partial last 32-k chunk and slices
// of unequal length (96: 3 chunks over 8 slices, 520: 17), the Terra k (2048, 5632), input rows
// with a padded stride. The reference is the bf16 input the kernel stages (rounded like the
// kernel) times w in fp32.
TEST_CASE("gemv_bf16 fused inputs and outputs match norm / silu_mul + cpu::matmul_nt") {
  int sms = 0;
  LOOM_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaStream_t stream;
  LOOM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (int m : {1, 2, 3, 4, 5, 8, 9, 16})
    for (auto [n, k] :
         {std::pair{19, 96}, std::pair{37, 520}, std::pair{1001, 2048}, std::pair{2047, 5632}}) {
      const int xs_ = k + 8;  // input row stride (Plain, RmsNorm)
      const std::vector<float> w = round_bf16(random_vec(size_t(n) * k, 7));
      DevBuf dw = upload(w, DType::BF16);
      for (GemvIn in : {GemvIn::Plain, GemvIn::RmsNorm, GemvIn::SiluMul}) {
        // The input as the caller passes it (xin) and as the kernel stages it (act, bf16).
        std::vector<float> xin, act(size_t(m) * k);
        const int src_rows = m + 2;
        std::vector<int32_t> rows(static_cast<size_t>(m));
        for (int i = 0; i < m; i++) rows[size_t(i)] = src_rows - 1 - i;  // reversed, skips 0, 1
        const std::vector<float> nw = random_vec(size_t(k), 10, 0.5f, 1.5f);
        if (in == GemvIn::Plain) {
          xin = round_bf16(random_vec(size_t(m) * xs_, 8));
          for (int i = 0; i < m; i++)
            std::copy_n(xin.begin() + size_t(i) * xs_, k, act.begin() + size_t(i) * k);
        } else if (in == GemvIn::RmsNorm) {
          xin = random_vec(size_t(src_rows) * xs_, 9, -3, 3);
          for (int i = 0; i < m; i++)
            rms_norm_row(xin.data() + size_t(rows[size_t(i)]) * xs_, nw.data(),
                         act.data() + size_t(i) * k, k);
          act = round_bf16(act);
        } else {
          xin = round_bf16(random_vec(size_t(m) * 2 * k, 11, -3, 3));
          silu_mul(xin.data(), act.data(), m, k);
          act = round_bf16(act);
        }
        std::vector<float> prod(size_t(m) * n);
        cpu::matmul_nt(act.data(), w.data(), nullptr, prod.data(), m, n, k);
        DevBuf dx = upload(xin, in == GemvIn::RmsNorm ? DType::F32 : DType::BF16);
        DevBuf dnw = upload(nw, DType::F32), drows = upload_ints(rows);
        std::vector<GemvOut> outs;
        if (in == GemvIn::Plain) outs = {GemvOut::Store, GemvOut::AddF32, GemvOut::StoreF32};
        if (in == GemvIn::RmsNorm) outs = {GemvOut::Store, GemvOut::StoreF32};
        if (in == GemvIn::SiluMul) outs = {GemvOut::AddF32};
        for (GemvOut out : outs)
          for (GemvKernel kernel : {GemvKernel::Fma, GemvKernel::Mma}) {
            if (kernel == GemvKernel::Fma && m > kGemvFmaMaxRows) continue;
            CAPTURE(int(kernel));  // 1 Fma, 2 Mma
            CAPTURE(m);
            CAPTURE(n);
            CAPTURE(k);
            CAPTURE(int(in));                                     // 0 Plain, 1 RmsNorm, 2 SiluMul
            CAPTURE(int(out));                                    // 0 Store, 1 AddF32, 2 StoreF32
            const int ld = out == GemvOut::StoreF32 ? n + 3 : n;  // padded output rows (logits)
            GemvArgs g;
            g.w = dw.get();
            g.n = n;
            g.k = k;
            g.m = m;
            g.in = in;
            g.x = dx.get();
            g.x_stride = in == GemvIn::SiluMul ? 0 : xs_;
            g.rows = in == GemvIn::RmsNorm ? drows.as<int32_t>() : nullptr;
            g.norm_w = dnw.as<float>();
            g.out = out;
            g.y_stride = ld;
            g.pdl = (m + int(out)) % 2 == 1;  // both launch paths
            g.kernel = kernel;
            std::vector<float> ref = prod, y0;
            DevBuf dy(size_t(m) * ld * 4);
            if (out == GemvOut::AddF32) {
              y0 = random_vec(size_t(m) * n, 12);
              for (size_t i = 0; i < ref.size(); i++) ref[i] += y0[i];
              dy = upload(y0, DType::F32);
            } else {
              dy.poison();
            }
            g.y = dy.get();
            LOOM_KERNEL(gemv_bf16(g, sms, stream));
            LOOM_CUDA_CHECK(cudaStreamSynchronize(stream));
            const DType yt = out == GemvOut::Store ? DType::BF16 : DType::F32;
            const std::vector<float> raw = download(dy, size_t(m) * ld, yt);
            const std::vector<float> got = unpad(raw, m, n, ld);
            const double err = rel_err(got, ref);
            CHECK_MESSAGE(err < (out == GemvOut::StoreF32 ? 3e-3 : 1e-2), "rel err ", err, ": ",
                          worst_elements(got, ref, n));
            size_t pad_written = 0;  // padding columns keep their NaN poison
            for (int i = 0; i < m; i++)
              for (int j = n; j < ld; j++)
                pad_written += std::isnan(raw[size_t(i) * ld + j]) ? 0 : 1;
            CHECK_MESSAGE(pad_written == 0, pad_written, " padding elements written");
          }
      }
    }
  LOOM_CUDA_CHECK(cudaStreamDestroy(stream));
}

// A decode-like chain launched back to back with pdl = true, each GEMV reading the previous
// one's output: 2 layers of qkv ← norm(x); x += o · q; gu ← norm(x); x += down · silu_mul(gu),
// then logits ← lm_head · norm(x[rows]). If a kernel read its input before its PDL wait, it would
// see the previous step's (or poisoned) data and the result would be far off. Run as stream
// launches and as a captured graph (the backend's way).
TEST_CASE("gemv_bf16 chain under PDL matches the CPU (each GEMV reads the one before)") {
  int sms = 0;
  LOOM_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int H = 2048, I = 5632, QKV = 2560, V = 4099, L = 2, LD = 4160;
  auto weight = [](int n, int k, uint64_t seed) {
    const float s = 1.7f / std::sqrt(float(k));
    return round_bf16(random_vec(size_t(n) * k, seed, -s, s));
  };
  struct Layer {
    std::vector<float> qkv, o, gu, down, n1, n2;
  };
  std::vector<Layer> Ls(L);
  std::vector<DevBuf> dev;  // keeps the uploads alive
  for (int l = 0; l < L; l++) {
    Layer& y = Ls[size_t(l)];
    const uint64_t s = 100 + 10 * uint64_t(l);
    y.qkv = weight(QKV, H, s);
    y.o = weight(H, H, s + 1);
    y.gu = weight(2 * I, H, s + 2);
    y.down = weight(H, I, s + 3);
    y.n1 = random_vec(size_t(H), s + 4, 0.5f, 1.5f);
    y.n2 = random_vec(size_t(H), s + 5, 0.5f, 1.5f);
  }
  const std::vector<float> lm = weight(V, H, 200), fnorm = random_vec(size_t(H), 201, 0.5f, 1.5f);
  std::vector<const void*> dq, dob, dgu, dd;
  std::vector<const float*> dn1, dn2;
  for (const Layer& y : Ls) {
    dev.push_back(upload(y.qkv, DType::BF16)), dq.push_back(dev.back().get());
    dev.push_back(upload(y.o, DType::BF16)), dob.push_back(dev.back().get());
    dev.push_back(upload(y.gu, DType::BF16)), dgu.push_back(dev.back().get());
    dev.push_back(upload(y.down, DType::BF16)), dd.push_back(dev.back().get());
    dev.push_back(upload(y.n1, DType::F32)), dn1.push_back(dev.back().as<float>());
    dev.push_back(upload(y.n2, DType::F32)), dn2.push_back(dev.back().as<float>());
  }
  DevBuf dlm = upload(lm, DType::BF16), dfn = upload(fnorm, DType::F32);
  cudaStream_t stream;
  LOOM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (int m : {1, 3, 12}) {  // the FMA kernel at 1 row, the tensor-core one at 3 and 12
    CAPTURE(m);
    const std::vector<float> x0 = random_vec(size_t(m) * H, 300 + uint64_t(m), -2, 2);
    std::vector<int32_t> rows(static_cast<size_t>(m));
    for (int i = 0; i < m; i++) rows[size_t(i)] = m - 1 - i;
    // CPU reference, rounding to bf16 where the GPU stores bf16.
    std::vector<float> x = x0, h(size_t(m) * H), qkv(size_t(m) * QKV), t(size_t(m) * H),
                       gu(size_t(m) * 2 * I), act(size_t(m) * I);
    for (const Layer& y : Ls) {
      for (int i = 0; i < m; i++)
        rms_norm_row(x.data() + size_t(i) * H, y.n1.data(), h.data() + size_t(i) * H, H);
      h = round_bf16(h);
      cpu::matmul_nt(h.data(), y.qkv.data(), nullptr, qkv.data(), m, QKV, H);
      qkv = round_bf16(qkv);
      std::vector<float> q(size_t(m) * H);  // the o GEMV reads the q part (row stride QKV)
      for (int i = 0; i < m; i++)
        std::copy_n(qkv.begin() + size_t(i) * QKV, H, q.begin() + size_t(i) * H);
      cpu::matmul_nt(q.data(), y.o.data(), nullptr, t.data(), m, H, H);
      for (size_t i = 0; i < x.size(); i++) x[i] += t[i];
      for (int i = 0; i < m; i++)
        rms_norm_row(x.data() + size_t(i) * H, y.n2.data(), h.data() + size_t(i) * H, H);
      h = round_bf16(h);
      cpu::matmul_nt(h.data(), y.gu.data(), nullptr, gu.data(), m, 2 * I, H);
      gu = round_bf16(gu);
      silu_mul(gu.data(), act.data(), m, I);
      act = round_bf16(act);
      cpu::matmul_nt(act.data(), y.down.data(), nullptr, t.data(), m, H, I);
      for (size_t i = 0; i < x.size(); i++) x[i] += t[i];
    }
    std::vector<float> hl(size_t(m) * H), logits(size_t(m) * V);
    for (int i = 0; i < m; i++)
      rms_norm_row(x.data() + size_t(rows[size_t(i)]) * H, fnorm.data(), hl.data() + size_t(i) * H,
                   H);
    hl = round_bf16(hl);
    cpu::matmul_nt(hl.data(), lm.data(), nullptr, logits.data(), m, V, H);

    DevBuf dx(size_t(m) * H * 4), dqkv(size_t(m) * QKV * 2), dgub(size_t(m) * 2 * I * 2),
        dlog(size_t(m) * LD * 4), drows = upload_ints(rows);
    auto chain = [&]() {
      auto run = [&](const void* w, int n, int k, GemvIn in, const void* xin, int x_stride,
                     const float* nw, const int32_t* r, GemvOut out, void* y, int y_stride) {
        GemvArgs g;
        g.w = w;
        g.n = n;
        g.k = k;
        g.m = m;
        g.in = in;
        g.x = xin;
        g.x_stride = x_stride;
        g.norm_w = nw;
        g.rows = r;
        g.out = out;
        g.y = y;
        g.y_stride = y_stride;
        g.pdl = true;
        LOOM_KERNEL(gemv_bf16(g, sms, stream));
      };
      for (int l = 0; l < L; l++) {
        run(dq[size_t(l)], QKV, H, GemvIn::RmsNorm, dx.get(), H, dn1[size_t(l)], nullptr,
            GemvOut::Store, dqkv.get(), 0);
        run(dob[size_t(l)], H, H, GemvIn::Plain, dqkv.get(), QKV, nullptr, nullptr, GemvOut::AddF32,
            dx.get(), 0);
        run(dgu[size_t(l)], 2 * I, H, GemvIn::RmsNorm, dx.get(), H, dn2[size_t(l)], nullptr,
            GemvOut::Store, dgub.get(), 0);
        run(dd[size_t(l)], H, I, GemvIn::SiluMul, dgub.get(), 0, nullptr, nullptr, GemvOut::AddF32,
            dx.get(), 0);
      }
      run(dlm.get(), V, H, GemvIn::RmsNorm, dx.get(), H, dfn.as<float>(), drows.as<int32_t>(),
          GemvOut::StoreF32, dlog.get(), LD);
    };
    for (bool graph : {false, true}) {
      CAPTURE(graph);
      LOOM_CUDA_CHECK(cudaMemcpy(dx.get(), x0.data(), x0.size() * 4, cudaMemcpyHostToDevice));
      dqkv.poison();
      dgub.poison();
      dlog.poison();
      LOOM_CUDA_CHECK(cudaDeviceSynchronize());
      if (!graph) {
        chain();
      } else {
        cudaGraph_t cg;
        cudaGraphExec_t exec;
        LOOM_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
        chain();
        LOOM_CUDA_CHECK(cudaStreamEndCapture(stream, &cg));
        LOOM_CUDA_CHECK(cudaGraphInstantiate(&exec, cg, 0));
        LOOM_CUDA_CHECK(cudaGraphLaunch(exec, stream));
        LOOM_CUDA_CHECK(cudaStreamSynchronize(stream));
        LOOM_CUDA_CHECK(cudaGraphExecDestroy(exec));
        LOOM_CUDA_CHECK(cudaGraphDestroy(cg));
      }
      LOOM_CUDA_CHECK(cudaStreamSynchronize(stream));
      const std::vector<float> gx = download(dx, x.size(), DType::F32);
      const std::vector<float> gl = unpad(download(dlog, size_t(m) * LD, DType::F32), m, V, LD);
      const double ex = rel_err(gx, x), el = rel_err(gl, logits);
      CHECK_MESSAGE(ex < 1e-2, "residual x rel err ", ex, ": ", worst_elements(gx, x, H));
      CHECK_MESSAGE(el < 1e-2, "logits rel err ", el, ": ", worst_elements(gl, logits, V));
    }
  }
  LOOM_CUDA_CHECK(cudaStreamDestroy(stream));
}

// The input is staged with 16-byte loads: a row stride that breaks that alignment is refused
// with the stride named, before any launch.
TEST_CASE("gemv_bf16 refuses an input row stride that is not a multiple of 8") {
  const int n = 16, k = 64;
  DevBuf dw = upload(std::vector<float>(size_t(n) * k, 0.5f), DType::BF16);
  DevBuf dx = upload(std::vector<float>(size_t(2) * (k + 4), 1.0f), DType::BF16);
  DevBuf dy(size_t(2) * n * 2);
  GemvArgs g;
  g.w = dw.get();
  g.n = n;
  g.k = k;
  g.m = 2;
  g.x = dx.get();
  g.x_stride = k + 4;
  g.y = dy.get();
  const Status st = gemv_bf16(g, 1, nullptr);
  CHECK_FALSE(st.ok);
  CHECK(st.message.find("x_stride 68 not a multiple of 8") != std::string::npos);
  g.x_stride = k + 8;  // the second row ends at the buffer's end
  CHECK(gemv_bf16(g, 1, nullptr).ok);
  LOOM_CUDA_CHECK(cudaDeviceSynchronize());
}

// The tensor-core kernel sums each output in an order fixed by k alone (gemv_mma.cu's header):
// row i of a 16-row run equals the same input row run alone, on a grid of one block, bit for
// bit, for a k whose slices take several load batches (5632: 22 chunks a slice).
TEST_CASE("gemv_bf16 tensor-core rows are bitwise the same at any m and grid size") {
  int sms = 0;
  LOOM_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int n = 1001, k = 5632, m = 16, ld = k + 8;
  DevBuf dw = upload(round_bf16(random_vec(size_t(n) * k, 41)), DType::BF16);
  DevBuf dx = upload(round_bf16(random_vec(size_t(m) * ld, 42, -2, 2)), DType::BF16);
  DevBuf dall(size_t(m) * n * 4), done(size_t(n) * 4);
  GemvArgs g;
  g.w = dw.get();
  g.n = n;
  g.k = k;
  g.m = m;
  g.x = dx.get();
  g.x_stride = ld;
  g.out = GemvOut::StoreF32;
  g.y = dall.get();
  g.kernel = GemvKernel::Mma;
  LOOM_KERNEL(gemv_bf16(g, sms, nullptr));
  const std::vector<float> all = download(dall, size_t(m) * n, DType::F32);
  for (int i : {0, 7, 8, 15}) {
    CAPTURE(i);
    g.m = 1;
    g.x = static_cast<const uint16_t*>(dx.get()) + size_t(i) * ld;
    g.y = done.get();
    LOOM_KERNEL(gemv_bf16(g, 1, nullptr));
    const std::vector<float> one = download(done, size_t(n), DType::F32);
    int differ = 0;
    for (int j = 0; j < n; j++)
      differ += std::memcmp(&one[size_t(j)], &all[size_t(i) * n + j], 4) != 0 ? 1 : 0;
    CHECK_MESSAGE(differ == 0, differ, " of ", n, " outputs differ from the 16-row run");
  }
}

// The one-row kernel built for fewer registers (GemvArgs::beside_attention) runs the same code:
// every fused input and output gives the full-register kernel's bits, at the Terra k.
TEST_CASE("gemv_bf16 beside attention gives the bits of the full-register kernel") {
  int sms = 0;
  LOOM_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  for (auto [n, k] : {std::pair{2560, 2048}, std::pair{2047, 5632}}) {
    DevBuf dw = upload(round_bf16(random_vec(size_t(n) * k, 51)), DType::BF16);
    DevBuf dnw = upload(random_vec(size_t(k), 52, 0.5f, 1.5f), DType::F32);
    DevBuf dplain = upload(round_bf16(random_vec(size_t(2) * k, 53, -2, 2)), DType::BF16);
    DevBuf dnorm = upload(random_vec(size_t(k), 54, -3, 3), DType::F32);
    const std::pair<GemvIn, GemvOut> pairs[] = {{GemvIn::Plain, GemvOut::Store},
                                                {GemvIn::Plain, GemvOut::AddF32},
                                                {GemvIn::RmsNorm, GemvOut::Store},
                                                {GemvIn::SiluMul, GemvOut::AddF32}};
    for (auto [in, out] : pairs) {
      CAPTURE(n);
      CAPTURE(int(in));   // 0 Plain, 1 RmsNorm, 2 SiluMul
      CAPTURE(int(out));  // 0 Store, 1 AddF32
      GemvArgs g;
      g.w = dw.get();
      g.n = n;
      g.k = k;
      g.m = 1;
      g.in = in;
      g.x = in == GemvIn::RmsNorm ? dnorm.get() : dplain.get();
      g.norm_w = dnw.as<float>();
      g.out = out;
      g.kernel = GemvKernel::Fma;
      const DType yt = out == GemvOut::Store ? DType::BF16 : DType::F32;
      const std::vector<float> y0 = random_vec(size_t(n), 55);
      const std::vector<float> before = download(upload(y0, yt), size_t(n), yt);  // y0 as stored
      std::vector<float> got[2];
      for (int beside = 0; beside < 2; beside++) {
        DevBuf dy = upload(y0, yt);  // AddF32 adds to it; Store overwrites it
        g.y = dy.get();
        g.beside_attention = beside == 1;
        LOOM_KERNEL(gemv_bf16(g, sms, nullptr));
        got[beside] = download(dy, size_t(n), yt);
      }
      int differ = 0, moved = 0;
      for (int j = 0; j < n; j++) {
        differ += std::memcmp(&got[0][size_t(j)], &got[1][size_t(j)], 4) != 0 ? 1 : 0;
        moved += got[1][size_t(j)] != before[size_t(j)] ? 1 : 0;
      }
      CHECK_MESSAGE(differ == 0, differ, " of ", n, " outputs differ");
      CHECK_MESSAGE(moved > n / 2, "only ", moved, " of ", n, " outputs written");
    }
  }
}

// The qkv GEMV beside attention is only faster while one of its blocks and a split-decode
// attention block (bf16, head_dim 64: Terra's) fit an SM's registers together; a kernel that
// grows past that keeps its bits and silently loses the overlap, so it is checked here.
TEST_CASE("gemv_bf16's beside-attention block and a decode attention block fit one SM") {
  int regs_per_sm = 0;
  LOOM_CUDA_CHECK(
      cudaDeviceGetAttribute(&regs_per_sm, cudaDevAttrMaxRegistersPerMultiprocessor, 0));
  const int gemv = gemv_beside_block_registers();
  const int attn = paged_attention_mma_decode_block_registers();
  REQUIRE(gemv > 0);
  REQUIRE(attn > 0);
  CHECK_MESSAGE(gemv + attn <= regs_per_sm, "GEMV block ", gemv, " + attention block ", attn,
                " registers > ", regs_per_sm, " an SM");
}

// At k 2496 the tensor-core kernel's dynamic shared memory (8 staged rows and the partial sums,
// 48,640 bytes) fits the default 48 KB but not with its static scratch (1,088 bytes): the launch
// must opt in (it failed with "invalid argument" when the opt-in looked at the dynamic part
// alone), and a failed launch must not leave its error to the next one.
TEST_CASE("gemv_bf16 opts in to shared memory that passes 48 KB with the static scratch") {
  const int n = 40, k = 2496, m = 5;
  const std::vector<float> w = round_bf16(random_vec(size_t(n) * k, 51));
  const std::vector<float> x = round_bf16(random_vec(size_t(m) * k, 52, -2, 2));
  std::vector<float> ref(size_t(m) * n);
  cpu::matmul_nt(x.data(), w.data(), nullptr, ref.data(), m, n, k);
  DevBuf dw = upload(w, DType::BF16), dx = upload(x, DType::BF16), dy(size_t(m) * n * 4);
  GemvArgs g;
  g.w = dw.get();
  g.n = n;
  g.k = k;
  g.m = m;
  g.x = dx.get();
  g.out = GemvOut::StoreF32;
  g.y = dy.get();
  g.kernel = GemvKernel::Mma;
  LOOM_KERNEL(gemv_bf16(g, 1, nullptr));
  const std::vector<float> got = download(dy, size_t(m) * n, DType::F32);
  CHECK_MESSAGE(rel_err(got, ref) < 3e-3, "rel err ", rel_err(got, ref));
}

// The FMA kernel is built for up to 8 rows: more is refused, naming the kernel and m.
TEST_CASE("gemv_bf16 refuses more than 8 rows for the FMA kernel") {
  DevBuf dw = upload(std::vector<float>(size_t(16) * 64, 0.5f), DType::BF16);
  DevBuf dx = upload(std::vector<float>(size_t(9) * 64, 1.0f), DType::BF16);
  DevBuf dy(size_t(9) * 16 * 2);
  GemvArgs g;
  g.w = dw.get();
  g.n = 16;
  g.k = 64;
  g.m = 9;
  g.x = dx.get();
  g.y = dy.get();
  g.kernel = GemvKernel::Fma;
  const Status st = gemv_bf16(g, 1, nullptr);
  CHECK_FALSE(st.ok);
  CHECK(st.message.find("m 9 with the FMA kernel (expected 1..8)") != std::string::npos);
}
