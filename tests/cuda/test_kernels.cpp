// Every CUDA kernel family against the CPU reference ops (backend/cpu/ops.h) and the shared
// sampler, on odd sizes (batch 1, 3, 19; head_dim 16 and 64; GQA 1, 3 and 8; contexts that
// cross 16-slot blocks; the 262,145-entry vocabulary), in fp32 (rel. error ≤ 1e-5) and bf16
// (≤ 1e-2). Outputs are poisoned with NaN before each run.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>

#include "backend/cpu/ops.h"
#include "backend/cuda/gemm.h"
#include "backend/sampler.h"
#include "cuda_test_util.h"
#include "kernels/activation.cuh"
#include "kernels/attention.cuh"
#include "kernels/embed.cuh"
#include "kernels/gemv.cuh"
#include "kernels/norm.cuh"
#include "kernels/rope.cuh"
#include "kernels/sampling.cuh"

using namespace loom;
using namespace loom::gpu;
using namespace loom::test;

static const DType kTypes[] = {DType::F32, DType::BF16};

TEST_CASE("rms_norm_residual matches x += delta; cpu::rms_norm") {
  for (DType t : kTypes)
    for (int rows : {1, 3, 19})
      for (int dim : {96, 2048}) {
        CAPTURE(dtype_name(t));
        CAPTURE(rows);
        CAPTURE(dim);
        const size_t n = size_t(rows) * dim;
        std::vector<float> x = random_vec(n, 1, -2, 2), delta = random_vec(n, 2);
        std::vector<float> w = random_vec(size_t(dim), 3, 0.5f, 1.5f);
        if (t == DType::BF16) delta = round_bf16(delta);
        std::vector<float> ref_x(n), ref(n);
        for (size_t i = 0; i < n; i++) ref_x[i] = x[i] + delta[i];
        cpu::rms_norm(ref_x.data(), w.data(), ref.data(), rows, dim, 1e-6f);
        DevBuf dx = upload(x, DType::F32), dd = upload(delta, t), dw = upload(w, DType::F32);
        DevBuf out(n * 4);
        out.poison();
        LOOM_KERNEL(rms_norm_residual(t, dx.as<float>(), dd.get(), dw.as<float>(), nullptr, rows,
                                      dim, 1e-6f, out.get(), nullptr));
        CHECK(rel_err(download(out, n, t), ref) < tolerance(t));
        CHECK(rel_err(download(dx, n, DType::F32), ref_x) < 1e-6);

        // Selected rows (the final norm): out row r is x row rows[r].
        const std::vector<int32_t> sel = {rows - 1, 0};
        DevBuf dsel = upload_ints(sel);
        DevBuf out2(2 * size_t(dim) * 4);
        out2.poison();
        LOOM_KERNEL(rms_norm_residual(t, dx.as<float>(), nullptr, dw.as<float>(),
                                      dsel.as<int32_t>(), 2, dim, 1e-6f, out2.get(), nullptr));
        std::vector<float> ref2(2 * size_t(dim));
        for (int r = 0; r < 2; r++)
          std::copy(ref.begin() + size_t(sel[size_t(r)]) * dim,
                    ref.begin() + size_t(sel[size_t(r)] + 1) * dim, ref2.begin() + size_t(r) * dim);
        CHECK(rel_err(download(out2, ref2.size(), t), ref2) < tolerance(t));
      }
}

TEST_CASE("silu_mul matches cpu::silu_mul") {
  for (DType t : kTypes)
    for (int rows : {1, 3, 19})
      for (int inter : {160, 5632}) {
        CAPTURE(dtype_name(t));
        CAPTURE(rows);
        CAPTURE(inter);
        std::vector<float> gu = random_vec(size_t(rows) * 2 * inter, 4, -4, 4);
        if (t == DType::BF16) gu = round_bf16(gu);
        std::vector<float> ref(size_t(rows) * inter);
        cpu::silu_mul(gu.data(), ref.data(), rows, inter);
        DevBuf dg = upload(gu, t), out(ref.size() * 4);
        out.poison();
        LOOM_KERNEL(silu_mul(t, dg.get(), out.get(), rows, inter, nullptr));
        CHECK(rel_err(download(out, ref.size(), t), ref) < tolerance(t));
      }
}

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

// The elements of a [rows, cols] result farthest from the reference, "[row, col] got X expected
// Y", and the count of non-finite values: what a failing check prints.
static std::string worst_elements(const std::vector<float>& got, const std::vector<float>& ref,
                                  int cols) {
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
static std::vector<float> unpad(const std::vector<float>& v, int rows, int cols, int ld) {
  std::vector<float> r(size_t(rows) * cols);
  for (int i = 0; i < rows; i++)
    std::copy_n(v.begin() + size_t(i) * ld, cols, r.begin() + size_t(i) * cols);
  return r;
}

// Every fused input with every output it is used with, m = 1..8 (the kernel is built for 1, 2,
// 4 and 8 rows; 3 and 5 leave zero rows), odd n, k with a partial last 32-lane step (96: 12
// chunks a row, 520: 65) and the Terra k (2048, 5632), input rows with a padded stride. The
// reference is the bf16 input the kernel stages (rounded like the kernel) times w in fp32.
TEST_CASE("gemv_bf16 fused inputs and outputs match norm / silu_mul + cpu::matmul_nt") {
  int sms = 0;
  LOOM_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaStream_t stream;
  LOOM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (int m : {1, 2, 3, 4, 5, 8})
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
            cpu::rms_norm(xin.data() + size_t(rows[size_t(i)]) * xs_, nw.data(),
                          act.data() + size_t(i) * k, 1, k, 1e-6f);
          act = round_bf16(act);
        } else {
          xin = round_bf16(random_vec(size_t(m) * 2 * k, 11, -3, 3));
          cpu::silu_mul(xin.data(), act.data(), m, k);
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
        for (GemvOut out : outs) {
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
            for (int j = n; j < ld; j++) pad_written += std::isnan(raw[size_t(i) * ld + j]) ? 0 : 1;
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
  for (int m : {1, 3}) {
    CAPTURE(m);
    const std::vector<float> x0 = random_vec(size_t(m) * H, 300 + uint64_t(m), -2, 2);
    std::vector<int32_t> rows(static_cast<size_t>(m));
    for (int i = 0; i < m; i++) rows[size_t(i)] = m - 1 - i;
    // CPU reference, rounding to bf16 where the GPU stores bf16.
    std::vector<float> x = x0, h(size_t(m) * H), qkv(size_t(m) * QKV), t(size_t(m) * H),
                       gu(size_t(m) * 2 * I), act(size_t(m) * I);
    for (const Layer& y : Ls) {
      cpu::rms_norm(x.data(), y.n1.data(), h.data(), m, H, 1e-6f);
      h = round_bf16(h);
      cpu::matmul_nt(h.data(), y.qkv.data(), nullptr, qkv.data(), m, QKV, H);
      qkv = round_bf16(qkv);
      std::vector<float> q(size_t(m) * H);  // the o GEMV reads the q part (row stride QKV)
      for (int i = 0; i < m; i++)
        std::copy_n(qkv.begin() + size_t(i) * QKV, H, q.begin() + size_t(i) * H);
      cpu::matmul_nt(q.data(), y.o.data(), nullptr, t.data(), m, H, H);
      for (size_t i = 0; i < x.size(); i++) x[i] += t[i];
      cpu::rms_norm(x.data(), y.n2.data(), h.data(), m, H, 1e-6f);
      h = round_bf16(h);
      cpu::matmul_nt(h.data(), y.gu.data(), nullptr, gu.data(), m, 2 * I, H);
      gu = round_bf16(gu);
      cpu::silu_mul(gu.data(), act.data(), m, I);
      act = round_bf16(act);
      cpu::matmul_nt(act.data(), y.down.data(), nullptr, t.data(), m, H, I);
      for (size_t i = 0; i < x.size(); i++) x[i] += t[i];
    }
    std::vector<float> hl(size_t(m) * H), logits(size_t(m) * V);
    for (int i = 0; i < m; i++)
      cpu::rms_norm(x.data() + size_t(rows[size_t(i)]) * H, fnorm.data(), hl.data() + size_t(i) * H,
                    1, H, 1e-6f);
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

TEST_CASE("embed_assemble: token rows, linear action rows, position tables") {
  const int hidden = 96, vocab = 1000, adim = 3, S = 13, T = 6;
  for (DType t : kTypes) {
    CAPTURE(dtype_name(t));
    const std::vector<int32_t> tokens = {5, kActionSlot, 999, 0, kActionSlot, 17, 3};
    const std::vector<int32_t> pos = {0, 12, 13, 25, 38, 77, 40};
    const int n = int(tokens.size());
    std::vector<float> embed = random_vec(size_t(vocab) * hidden, 13);
    if (t == DType::BF16) embed = round_bf16(embed);
    const std::vector<float> ps = random_vec(size_t(S) * hidden, 14),
                             pt = random_vec(size_t(T) * hidden, 15),
                             actions = random_vec(size_t(n) * adim, 16),
                             w0 = random_vec(size_t(hidden) * adim, 17),
                             b0 = random_vec(size_t(hidden), 18);
    std::vector<int32_t> act_row(size_t(n), -1), act_slots;
    for (int i = 0; i < n; i++)
      if (tokens[size_t(i)] < 0) act_row[size_t(i)] = int(act_slots.size()), act_slots.push_back(i);
    std::vector<float> ref(size_t(n) * hidden);
    for (int i = 0; i < n; i++) {
      float* r = ref.data() + size_t(i) * hidden;
      if (tokens[size_t(i)] >= 0) {
        std::copy_n(embed.begin() + size_t(tokens[size_t(i)]) * hidden, hidden, r);
      } else {
        std::vector<float> a(static_cast<size_t>(hidden));
        cpu::matmul_nt(actions.data() + size_t(i) * adim, w0.data(), b0.data(), a.data(), 1, hidden,
                       adim);
        if (t == DType::BF16) a = round_bf16(a);
        std::copy(a.begin(), a.end(), r);
      }
      const int p = pos[size_t(i)];
      for (int j = 0; j < hidden; j++)
        r[j] += ps[size_t(p % S) * hidden + j] + pt[size_t(p / S) * hidden + j];
    }
    DevBuf dtok = upload_ints(tokens), dpos = upload_ints(pos), drow = upload_ints(act_row),
           dslots = upload_ints(act_slots), demb = upload(embed, t), dps = upload(ps, DType::F32),
           dpt = upload(pt, DType::F32), dact = upload(actions, DType::F32),
           dw0 = upload(w0, DType::F32), db0 = upload(b0, DType::F32);
    DevBuf act_out(act_slots.size() * hidden * 4), x(ref.size() * 4);
    act_out.poison();
    x.poison();
    LOOM_KERNEL(action_input_layer(dact.as<float>(), adim, dslots.as<int32_t>(),
                                   int(act_slots.size()), dw0.as<float>(), db0.as<float>(), hidden,
                                   false, t, act_out.get(), nullptr));
    EmbedArgs e;
    e.t = t;
    e.tokens = dtok.as<int32_t>();
    e.positions = dpos.as<int32_t>();
    e.act_row = drow.as<int32_t>();
    e.embed = demb.get();
    e.act_out = act_out.get();
    e.pos_spatial = dps.as<float>();
    e.pos_temporal = dpt.as<float>();
    e.frame_slots = S;
    e.spatial_rows = S;
    e.temporal_rows = T;
    e.vocab = vocab;
    e.n_slots = n;
    e.hidden = hidden;
    e.x = x.as<float>();
    LOOM_KERNEL(embed_assemble(e, nullptr));
    CHECK(rel_err(download(x, ref.size(), DType::F32), ref) < tolerance(t));
  }
}

namespace {

struct AttnCase {
  int heads, kv_heads, head_dim, splits;
  std::vector<std::pair<int, int>> seqs;  // (kv_len, n_new)
};

void run_attention_case(const AttnCase& c, DType t) {
  const int bs = 16, H = c.heads, KV = c.kv_heads, D = c.head_dim;
  const int row = (H + 2 * KV) * D, kv_row = KV * D;
  const float theta = 10000.0f;
  // Block tables: a shuffled pool, so tables are not the identity.
  int total_blocks = 2;
  for (auto [kv, n] : c.seqs) total_blocks += (kv + n + bs - 1) / bs;
  std::vector<int32_t> perm(static_cast<size_t>(total_blocks));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(7));
  int bt_stride = 0;
  for (auto [kv, n] : c.seqs) bt_stride = std::max(bt_stride, (kv + n + bs - 1) / bs);
  const int n_seqs = int(c.seqs.size());
  std::vector<int32_t> bt(size_t(n_seqs) * bt_stride, -1), slot_start{0}, kv_len, positions,
      cache_slot, tiles;
  int next = 0;
  const int spt = attention_slots_per_tile(H, KV);
  for (int s = 0; s < n_seqs; s++) {
    const auto [kv, n] = c.seqs[size_t(s)];
    for (int b = 0; b < (kv + n + bs - 1) / bs; b++)
      bt[size_t(s) * bt_stride + b] = perm[size_t(next++)];
    kv_len.push_back(kv);
    for (int j = 0; j < n; j++) {
      positions.push_back(kv + j);
      const int ci = kv + j;
      cache_slot.push_back(bt[size_t(s) * bt_stride + ci / bs] * bs + ci % bs);
    }
    for (int j0 = 0; j0 < n; j0 += spt) tiles.insert(tiles.end(), {s, j0, std::min(spt, n - j0)});
    slot_start.push_back(slot_start.back() + n);
  }
  const int n_slots = slot_start.back(), n_tiles = int(tiles.size() / 3);
  const size_t pool = size_t(total_blocks) * bs * kv_row;
  std::vector<float> kc = random_vec(pool, 21), vc = random_vec(pool, 22);
  std::vector<float> qkv = random_vec(size_t(n_slots) * row, 23, -2, 2);
  if (t == DType::BF16) kc = round_bf16(kc), vc = round_bf16(vc), qkv = round_bf16(qkv);

  // CPU reference, sequence by sequence.
  std::vector<float> ref_k = kc, ref_v = vc, ref_out(size_t(n_slots) * H * D);
  for (int s = 0; s < n_seqs; s++) {
    const auto [kv, n] = c.seqs[size_t(s)];
    std::vector<float> q(size_t(n) * H * D), k(size_t(n) * kv_row), v(size_t(n) * kv_row);
    for (int j = 0; j < n; j++) {
      const float* r = qkv.data() + size_t(slot_start[size_t(s)] + j) * row;
      std::copy_n(r, H * D, q.data() + size_t(j) * H * D);
      std::copy_n(r + H * D, kv_row, k.data() + size_t(j) * kv_row);
      std::copy_n(r + H * D + kv_row, kv_row, v.data() + size_t(j) * kv_row);
    }
    const int32_t* p = positions.data() + slot_start[size_t(s)];
    cpu::rope(q.data(), p, n, H, D, theta);
    cpu::rope(k.data(), p, n, KV, D, theta);
    const int32_t* table = bt.data() + size_t(s) * bt_stride;
    cpu::kv_write(k.data(), v.data(), ref_k.data(), ref_v.data(), table, kv, n, KV, D, bs);
    cpu::paged_attention(q.data(), ref_k.data(), ref_v.data(), table, kv, n, H, KV, D, bs,
                         ref_out.data() + size_t(slot_start[size_t(s)]) * H * D);
  }

  std::vector<float> inv(static_cast<size_t>(D / 2));
  for (int j = 0; j < D / 2; j++) inv[size_t(j)] = 1.0f / std::pow(theta, float(2 * j) / float(D));
  DevBuf dqkv = upload(qkv, t), dk = upload(kc, t), dv = upload(vc, t),
         dinv = upload(inv, DType::F32), dpos = upload_ints(positions),
         dcs = upload_ints(cache_slot), dbt = upload_ints(bt), dkv = upload_ints(kv_len),
         dss = upload_ints(slot_start), dtiles = upload_ints(tiles);
  const size_t blocks = size_t(n_tiles) * KV * c.splits;
  DevBuf po(attention_partial_floats(blocks, D) * 4), pml(blocks * kAttnRows * 2 * 4);
  DevBuf out(size_t(n_slots) * H * D * 4);
  out.poison();
  po.poison();
  pml.poison();
  RopeKvArgs r;
  r.t = t;
  r.qkv = dqkv.get();
  r.positions = dpos.as<int32_t>();
  r.cache_slot = dcs.as<int32_t>();
  r.inv_freq = dinv.as<float>();
  r.n_slots = n_slots;
  r.heads = H;
  r.kv_heads = KV;
  r.head_dim = D;
  r.k_cache = dk.get();
  r.v_cache = dv.get();
  LOOM_KERNEL(rope_kv_write(r, nullptr));
  AttentionArgs a;
  a.t = t;
  a.qkv = dqkv.get();
  a.k_cache = dk.get();
  a.v_cache = dv.get();
  a.block_tables = dbt.as<int32_t>();
  a.bt_stride = bt_stride;
  a.kv_len = dkv.as<int32_t>();
  a.slot_start = dss.as<int32_t>();
  a.tiles = dtiles.as<int32_t>();
  a.n_tiles = n_tiles;
  a.heads = H;
  a.kv_heads = KV;
  a.head_dim = D;
  a.block_size = bs;
  a.num_splits = c.splits;
  a.partial_o = po.as<float>();
  a.partial_ml = pml.as<float>();
  a.out = out.get();
  LOOM_KERNEL(paged_attention(a, nullptr));
  CHECK(rel_err(download(dk, pool, t), ref_k) < tolerance(t));
  CHECK(rel_err(download(dv, pool, t), ref_v) < tolerance(t));
  CHECK(rel_err(download(out, ref_out.size(), t), ref_out) < tolerance(t));
  // The decode kernel on the same (already written) cache, where every tile is one slot.
  if (n_tiles == n_slots && H / KV <= kDecodeMaxG) {
    out.poison();
    po.poison();
    pml.poison();
    a.decode = true;
    LOOM_KERNEL(paged_attention(a, nullptr));
    CHECK(rel_err(download(out, ref_out.size(), t), ref_out) < tolerance(t));
    // ... and with RoPE and the KV write fused in, from the unrotated qkv and the old cache.
    DevBuf qkv2 = upload(qkv, t), k2 = upload(kc, t), v2 = upload(vc, t);
    out.poison();
    a.qkv = qkv2.get();
    a.k_cache = k2.get();
    a.v_cache = v2.get();
    a.fuse_rope = true;
    a.positions = dpos.as<int32_t>();
    a.cache_slot = dcs.as<int32_t>();
    a.inv_freq = dinv.as<float>();
    LOOM_KERNEL(paged_attention(a, nullptr));
    CHECK(rel_err(download(out, ref_out.size(), t), ref_out) < tolerance(t));
    CHECK(rel_err(download(k2, pool, t), ref_k) < tolerance(t));
    CHECK(rel_err(download(v2, pool, t), ref_v) < tolerance(t));
  }
}

}  // namespace

TEST_CASE("rope_kv_write + paged_attention match cpu rope, kv_write, paged_attention") {
  const std::vector<std::pair<int, int>> mixed = {{0, 19}, {37, 1}, {5, 7}, {16, 3}};
  const std::vector<AttnCase> cases = {
      {4, 4, 16, 1, mixed},                         // GQA 1, head_dim 16
      {6, 2, 16, 3, mixed},                         // GQA 3 (the tiny models), combine path
      {32, 4, 64, 1, mixed},                        // Terra's heads, GQA 8
      {32, 4, 64, 4, mixed},                        // ... with splits
      {32, 4, 64, 7, {{700, 1}, {1, 1}, {63, 1}}},  // decode batch 3 across many blocks
      {32, 4, 64, 64, {{14000, 1}}},                // Terra's longest context, 55 splits
      {6, 2, 16, 4, {{600, 1}, {3, 1}}},            // decode GQA 3, head_dim 16
      {4, 4, 16, 1, {{300, 1}}},                    // decode GQA 1, one split of two passes
      {8, 8, 64, 2, {{0, 40}, {31, 2}}},            // GQA 1, prefill tiles of 32 slots
      {32, 4, 64, 5, {{300, 9}, {0, 200}}},         // long prefill: splits + combine, rows
                                                    // with no key in early/late splits
  };
  // Batch 19 decode: contexts 0, 37, 74, ... cross many block boundaries.
  AttnCase b19{32, 4, 64, 8, {}};
  for (int i = 0; i < 19; i++) b19.seqs.push_back({37 * i, 1});
  std::vector<AttnCase> all = cases;
  all.push_back(b19);
  for (DType t : kTypes)
    for (const AttnCase& c : all) {
      CAPTURE(dtype_name(t));
      CAPTURE(c.heads);
      CAPTURE(c.kv_heads);
      CAPTURE(c.head_dim);
      CAPTURE(c.splits);
      run_attention_case(c, t);
    }
}

TEST_CASE("device sampler gives sample_token's token over the full 262,145 vocabulary") {
  const int vocab = 262145;
  struct Mode {
    float temperature;
    int top_k;
    float top_p;
  };
  const std::vector<Mode> modes = {{0.0f, 0, 1.0f}, {0.9f, 0, 1.0f},    {1.0f, 50, 1.0f},
                                   {0.8f, 0, 0.9f}, {1.0f, 1000, 0.5f}, {0.7f, 0, 0.05f},
                                   {1.3f, 1, 1.0f}};
  // Two logit sets: continuous (no ties) and quantised (many exact ties, which exercise the
  // lowest-id tie rules of argmax, top-k and top-p).
  for (int quantised = 0; quantised < 2; quantised++) {
    CAPTURE(quantised);
    std::mt19937_64 g(31 + quantised);
    std::normal_distribution<float> nd(0.0f, 3.0f);
    const int rows = int(modes.size());
    std::vector<float> logits(size_t(rows) * vocab);
    for (float& v : logits) {
      v = nd(g);
      if (quantised) v = std::round(v * 2.0f) / 2.0f;
    }
    DevBuf dl = upload(logits, DType::F32);
    DevBuf ws(sample_workspace_bytes(rows)), tok(size_t(rows) * 4);
    int checked = 0;
    for (uint64_t seed : {0ull, 7ull, 123456789ull})
      for (uint64_t draw : {0ull, 1ull, 5000000000ull}) {
        std::vector<SampleParamsDev> p(static_cast<size_t>(rows));
        for (int r = 0; r < rows; r++) {
          p[size_t(r)].seed = seed;
          p[size_t(r)].draw_index = draw;
          p[size_t(r)].temperature = modes[size_t(r)].temperature;
          p[size_t(r)].top_k = modes[size_t(r)].top_k;
          p[size_t(r)].top_p = modes[size_t(r)].top_p;
          p[size_t(r)].sample_index = uint32_t(r % 3);
          p[size_t(r)].active = 1;
        }
        DevBuf dp = upload_ints(p);
        tok.poison();
        LOOM_KERNEL(sample_tokens(dl.as<float>(), rows, vocab, vocab, dp.as<SampleParamsDev>(),
                                  ws.get(), tok.as<int32_t>(), nullptr));
        std::vector<int32_t> got(static_cast<size_t>(rows));
        LOOM_CUDA_CHECK(cudaMemcpy(got.data(), tok.get(), got.size() * 4, cudaMemcpyDeviceToHost));
        for (int r = 0; r < rows; r++) {
          SamplingParams sp;
          sp.temperature = modes[size_t(r)].temperature;
          sp.top_k = modes[size_t(r)].top_k;
          sp.top_p = modes[size_t(r)].top_p;
          sp.seed = seed;
          const int32_t want =
              sample_token(logits.data() + size_t(r) * vocab, vocab, sp, uint32_t(r % 3), draw);
          CAPTURE(r);
          CAPTURE(seed);
          CAPTURE(draw);
          CHECK(got[size_t(r)] == want);
          checked++;
        }
      }
    CHECK(checked == 9 * int(modes.size()));
  }
  // An inactive row writes -1.
  std::vector<float> l(1000, 0.5f);
  DevBuf dl = upload(l, DType::F32), ws(sample_workspace_bytes(1)), tok(4);
  SampleParamsDev off{};
  DevBuf dp = upload_ints(std::vector<SampleParamsDev>{off});
  LOOM_KERNEL(sample_tokens(dl.as<float>(), 1, 1000, 1000, dp.as<SampleParamsDev>(), ws.get(),
                            tok.as<int32_t>(), nullptr));
  int32_t got = 0;
  LOOM_CUDA_CHECK(cudaMemcpy(&got, tok.get(), 4, cudaMemcpyDeviceToHost));
  CHECK(got == -1);
}
