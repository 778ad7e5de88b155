// Batch invariance (issue 4 §3, `--batch-invariant`):
//   1. linear_fixed (kernels/linear_fixed.cuh) against cpu::matmul_nt on the same bf16 inputs,
//      fp32 and bf16 outputs, Terra's and tiny_v1's shapes and odd ones (k tails of 8 and of a
//      segment plus 8, n not a multiple of 16, m across every tile choice), with a padded
//      output stride whose padding must stay untouched;
//      through every kernel (register path, 64-, 128- and 192-tiles, forced by
//      LinearFixedArgs::path),
//      which must also agree bitwise with each other;
//   2. linear_fixed row invariance, bitwise: each row of an m = 5, 64, 300, 1746 product (rows
//      drawn from a pool, in shuffled places) equals the m = 1 product of that row alone (the
//      register path), for the kernel picked by shape and for each tiled kernel forced, k 96,
//      160, 2048, 5632, odd n;
//   3. end to end on tiny_v1 (bf16 CUDA, batch-invariant): one job alone and the same job among
//      64 others of different prompt lengths, seeds and sampling modes (two of them share its
//      context frames) give identical tokens in every frame, and so do four of the others
//      against their own alone-runs.
// A failure names the shape, row, column and both values (bits for the bitwise checks).
#include <doctest/doctest.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <numeric>
#include <random>

#include "backend/cpu/ops.h"
#include "backend/cuda/cuda_backend.h"
#include "cuda_test_util.h"
#include "engine/engine.h"
#include "job_source.h"
#include "kernels/linear_fixed.cuh"
#include "model/mapping.h"

using namespace loom;
using namespace loom::test;
using loom::gpu::linear_fixed;
using loom::gpu::LinearFixedArgs;

namespace {

uint32_t f32_bits(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return u;
}

// y (device) = x · wᵀ through linear_fixed; returns the [m, ldy] output as raw bytes.
std::vector<uint8_t> run_linear(const DevBuf& x, const DevBuf& w, int m, int n, int k, DType y_t,
                                int ldy, int path = gpu::kPathAuto) {
  const size_t es = dtype_size(y_t);
  DevBuf y(size_t(std::max(m, 1)) * ldy * es);
  y.poison();
  LinearFixedArgs a;
  a.x = x.get();
  a.w = w.get();
  a.y = y.get();
  a.y_t = y_t;
  a.m = m;
  a.n = n;
  a.k = k;
  a.ldy = ldy;
  a.path = path;
  const gpu::Status st = linear_fixed(a, nullptr);
  INFO("linear_fixed m ", m, " n ", n, " k ", k, " path ", path, ": ", st.message);
  REQUIRE(st.ok);
  LOOM_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<uint8_t> out(size_t(m) * ldy * es);
  LOOM_CUDA_CHECK(cudaMemcpy(out.data(), y.get(), out.size(), cudaMemcpyDeviceToHost));
  return out;
}

float value_at(const std::vector<uint8_t>& y, DType t, size_t i) {
  if (t == DType::F32) {
    float v;
    std::memcpy(&v, y.data() + 4 * i, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, y.data() + 2 * i, 2);
  return bf16_to_f32(h);
}

const char* path_name(int path) {
  switch (path) {
    case gpu::kPathAuto:
      return "auto";
    case gpu::kPathRows:
      return "rows";
    case gpu::kPathTile64:
      return "tile64";
    case gpu::kPathTile128:
      return "tile128";
    case gpu::kPathTile192:
      return "tile192";
  }
  return "?";
}

// Where two outputs of m rows × n columns (row stride ldy) first differ, with both values and
// bits; "" when bitwise equal.
std::string first_difference(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want,
                             DType t, int m, int n, int ldy) {
  const size_t es = dtype_size(t);
  int bad = 0;
  std::string first;
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      const size_t e = size_t(i) * ldy + j;
      if (std::memcmp(got.data() + e * es, want.data() + e * es, es) == 0) continue;
      if (bad++ == 0) {
        const float g = value_at(got, t, e), w = value_at(want, t, e);
        char buf[200];
        std::snprintf(buf, sizeof buf, "%.9g (0x%08x) vs %.9g (0x%08x)", double(g), f32_bits(g),
                      double(w), f32_bits(w));
        first = "row " + std::to_string(i) + " col " + std::to_string(j) + ": " + buf;
      }
    }
  if (bad) first += " (" + std::to_string(bad) + " elements differ)";
  return first;
}

}  // namespace

TEST_CASE("linear_fixed equals cpu::matmul_nt on bf16 inputs") {
  struct Shape {
    int m, n, k;
  };
  // Tiny_v1 (k 96, 160), Terra (2048, 5632), odd n, k tails (40 = 32 + 8, 264 = 256 + 8, 8),
  // m in every register-path tile (≤ 8, 16, 32, 64, more) and past every tiled-path tile
  // (64, 128; 1746 = prefill); each shape through every kernel.
  const Shape shapes[] = {{1, 96, 96},        {3, 1000, 96},    {19, 160, 96},    {65, 2560, 2048},
                          {300, 11264, 2048}, {7, 2048, 5632},  {5, 77, 40},      {9, 33, 264},
                          {130, 17, 8},       {16, 1001, 160},  {32, 45, 520},    {64, 31, 2048},
                          {2, 262, 5632},     {1746, 77, 2048}, {333, 129, 5632}, {100, 1001, 96},
                          {257, 99, 160}};
  int checked = 0;
  for (const Shape& sh : shapes) {
    const int m = sh.m, n = sh.n, k = sh.k;
    CAPTURE(m);
    CAPTURE(n);
    CAPTURE(k);
    // Weights at Terra-like scale (1/sqrt(k)) keep the outputs O(1).
    const float ws = 1.0f / std::sqrt(float(k));
    const std::vector<float> xv = round_bf16(random_vec(size_t(m) * k, 1000 + m));
    const std::vector<float> wv = round_bf16(random_vec(size_t(n) * k, 2000 + n, -ws, ws));
    std::vector<float> want(size_t(m) * n);
    cpu::matmul_nt(xv.data(), wv.data(), nullptr, want.data(), m, n, k);
    const DevBuf x = upload(xv, DType::BF16), w = upload(wv, DType::BF16);
    for (DType yt : {DType::F32, DType::BF16}) {
      const bool f32 = yt == DType::F32;
      CAPTURE(f32);
      const int ldy = f32 ? n + 3 : n;  // fp32: padded rows, as the logits buffer
      std::vector<uint8_t> rows_path;   // the register path's output, which all must equal
      for (int path : {gpu::kPathRows, gpu::kPathTile64, gpu::kPathTile128, gpu::kPathTile192,
                       gpu::kPathAuto}) {
        CAPTURE(path_name(path));
        const std::vector<uint8_t> y = run_linear(x, w, m, n, k, yt, ldy, path);
        if (path == gpu::kPathRows) {
          rows_path = y;
        } else {
          const std::string d = first_difference(y, rows_path, yt, m, n, ldy);
          if (!d.empty())
            MESSAGE("path ", path_name(path), " differs from the register path at ", d);
          CHECK(d.empty());
        }
        std::vector<float> got(size_t(m) * n);
        for (int i = 0; i < m; i++)
          for (int j = 0; j < n; j++) got[size_t(i) * n + j] = value_at(y, yt, size_t(i) * ldy + j);
        // fp32 out: only the accumulation order (and the tensor cores' internal rounding)
        // differs from the CPU; bf16 out: one rounding more. An indexing bug gives ~1.
        const double tol = f32 ? 1e-4 : 8e-3;
        const double err = rel_err(got, want);
        if (!(err < tol)) {
          size_t worst = 0;
          double wd = -1;
          for (size_t i = 0; i < got.size(); i++) {
            const double d = std::isfinite(got[i]) ? std::fabs(double(got[i]) - want[i]) : 1e30;
            if (d > wd) wd = d, worst = i;
          }
          MESSAGE("worst element row ", worst / size_t(n), " col ", worst % size_t(n), ": got ",
                  got[worst], ", want ", want[worst], " (rel err of the whole ", err, ")");
        }
        CHECK(err < tol);
        // The padding of each fp32 row must keep its poison bytes (0xff).
        for (int i = 0; f32 && i < m; i++)
          for (int j = n; j < ldy; j++) {
            uint32_t b;
            std::memcpy(&b, y.data() + 4 * (size_t(i) * ldy + j), 4);
            if (b != 0xffffffffu) {
              MESSAGE("padding written at row ", i, " col ", j);
              CHECK(b == 0xffffffffu);
              i = m;
              break;
            }
          }
        checked++;
      }
    }
  }
  CHECK(checked == 10 * int(sizeof(shapes) / sizeof(shapes[0])));
}

TEST_CASE("linear_fixed rows are bitwise independent of the batch") {
  struct Shape {
    int n, k;
  };
  // qkv and down of Terra, lm_head-like odd n, tiny_v1's down, odd n at k 160, 2048, 5632.
  const Shape shapes[] = {{2560, 2048}, {2048, 5632}, {1001, 96}, {96, 160},
                          {77, 160},    {999, 2048},  {135, 5632}};
  constexpr int kPool = 300;
  for (const Shape& sh : shapes) {
    const int n = sh.n, k = sh.k;
    CAPTURE(n);
    CAPTURE(k);
    const float ws = 1.0f / std::sqrt(float(k));
    const std::vector<float> pool = round_bf16(random_vec(size_t(kPool) * k, 31 + k, -2, 2));
    const DevBuf w = upload(round_bf16(random_vec(size_t(n) * k, 77 + n, -ws, ws)), DType::BF16);
    for (DType yt : {DType::F32, DType::BF16}) {
      const bool f32 = yt == DType::F32;
      CAPTURE(f32);
      const size_t rb = size_t(n) * dtype_size(yt);  // bytes of one output row
      // Every pool row alone (m = 1).
      std::vector<std::vector<uint8_t>> alone(kPool);
      for (int r = 0; r < kPool; r++) {
        const DevBuf x1 =
            upload(std::vector<float>(pool.begin() + long(r) * k, pool.begin() + long(r + 1) * k),
                   DType::BF16);
        alone[size_t(r)] = run_linear(x1, w, 1, n, k, yt, n, gpu::kPathRows);
      }
      for (int m : {5, 64, 300, 1746}) {
        CAPTURE(m);
        // Batch row i holds pool row src[i]: a shuffle, so a row sits at a new index (m = 1746:
        // the pool 6 times over, shuffled, so each pool row sits at 5-6 places).
        std::vector<int> src(static_cast<size_t>(kPool) * 6);
        for (size_t i = 0; i < src.size(); i++) src[i] = int(i % kPool);
        std::shuffle(src.begin(), src.end(), std::mt19937(uint32_t(m)));
        src.resize(size_t(m));
        std::vector<float> xb(size_t(m) * k);
        for (int i = 0; i < m; i++)
          std::copy(pool.begin() + long(src[size_t(i)]) * k,
                    pool.begin() + long(src[size_t(i)] + 1) * k, xb.begin() + long(i) * k);
        const DevBuf xdev = upload(xb, DType::BF16);
        for (int path : {gpu::kPathAuto, gpu::kPathTile64, gpu::kPathTile128, gpu::kPathTile192}) {
          CAPTURE(path_name(path));
          const std::vector<uint8_t> y = run_linear(xdev, w, m, n, k, yt, n, path);
          int bad_rows = 0;
          for (int i = 0; i < m; i++) {
            const uint8_t* got = y.data() + size_t(i) * rb;
            const std::vector<uint8_t>& want = alone[size_t(src[size_t(i)])];
            if (std::memcmp(got, want.data(), rb) == 0) continue;
            if (bad_rows++ < 3) {
              int j = 0;
              const size_t es = dtype_size(yt);
              while (std::memcmp(got + size_t(j) * es, want.data() + size_t(j) * es, es) == 0) j++;
              std::vector<uint8_t> gv(got, got + rb);
              const float g = value_at(gv, yt, size_t(j)), a = value_at(want, yt, size_t(j));
              char buf[200];
              std::snprintf(buf, sizeof buf, "%.9g (0x%08x) vs alone %.9g (0x%08x)", double(g),
                            f32_bits(g), double(a), f32_bits(a));
              MESSAGE("path ", path_name(path), " m ", m, ": batch row ", i, " (pool row ",
                      src[size_t(i)], ") differs from its m = 1 result first at col ", j, ": ",
                      buf);
            }
          }
          if (bad_rows) MESSAGE(bad_rows, " of ", m, " rows differ (path ", path_name(path), ")");
          CHECK(bad_rows == 0);
        }
      }
    }
  }
}

namespace {

// A tiny_v1 frame job: ctx context frames of random image ids, `frames` to generate.
Job frame_job(const ModelSpec& sp, const std::string& id, int line, uint32_t prompt_seed, int ctx,
              int frames, SamplingParams sampling) {
  Job j = synthetic_frame_job(sp, id, line, prompt_seed, ctx, frames);
  j.sampling = sampling;
  return j;
}

// Runs the jobs together (up to max_seqs at once); id → frames of sample 0.
std::map<std::string, std::vector<std::vector<int32_t>>> run_jobs(
    const ModelSpec& spec, Backend& backend, const std::vector<Job>& jobs, int max_seqs,
    bool pipeline = true, int num_blocks = 0) {
  EngineOptions opt;
  opt.scheduler.max_seqs = max_seqs;
  opt.cache.block_size = 16;
  opt.cache.num_blocks = num_blocks > 0 ? num_blocks : 8 * int(jobs.size()) + 16;
  opt.pipeline = pipeline;
  Engine engine(spec, backend, opt);
  std::map<std::string, std::vector<std::vector<int32_t>>> out;
  const RunStats st = engine.run(loom::test::source_of(jobs), [&](const JobResult& r) {
    INFO("job ", r.id, ": ", r.error);
    REQUIRE(r.ok);
    out[r.id] = r.frames;
  });
  CHECK(st.jobs_failed == 0);
  return out;
}

void check_same_frames(const std::vector<std::vector<int32_t>>& crowd,
                       const std::vector<std::vector<int32_t>>& alone, const std::string& id) {
  CAPTURE(id);
  REQUIRE(crowd.size() == alone.size());
  for (size_t f = 0; f < alone.size(); f++) {
    REQUIRE(crowd[f].size() == alone[f].size());
    for (size_t i = 0; i < alone[f].size(); i++)
      if (crowd[f][i] != alone[f][i]) {
        MESSAGE("job ", id, " frame ", f, " token ", i, ": ", crowd[f][i], " in the first run, ",
                alone[f][i], " in the second");
        CHECK(crowd[f][i] == alone[f][i]);
        return;
      }
  }
}

}  // namespace

TEST_CASE("tiny_v1 bf16 batch-invariant: a job's tokens alone equal its tokens among 64 others") {
  const LoadedModel m = load_model(std::string(LOOM_TESTDATA) + "/tiny_v1");
  const ModelSpec& spec = m.spec;
  auto gpu = make_cuda_backend(ComputeDType::BF16, 0, true);
  REQUIRE(gpu->batch_invariant());
  gpu->load(spec, m.weights);

  // The target: pure sampling at temperature 1 over the whole vocabulary (the draw most
  // sensitive to any change of the logits), 2 context frames, 4 frames.
  const SamplingParams target_sp{1.0f, 0, 1.0f, 4242};
  const Job target = frame_job(spec, "target", 65, 777, 2, 4, target_sp);
  // 64 others: 1-3 context frames (13-39 prompt slots), 2-4 frames, seeds and modes vary;
  // others 10 and 40 share the target's context frames (prefix-cache hits on its blocks).
  std::vector<Job> crowd;
  for (int i = 0; i < 64; i++) {
    if (i == 32) crowd.push_back(target);
    SamplingParams sp{0.9f, 0, 1.0f, uint64_t(100 + i)};
    if (i % 4 == 1) sp.top_k = 50;
    if (i % 4 == 2) sp.temperature = 0.0f;  // greedy
    const bool share = i == 10 || i == 40;
    crowd.push_back(frame_job(spec, "other-" + std::to_string(i), i + 1,
                              share ? 777 : uint32_t(5000 + i), share ? 2 : 1 + i % 3, 2 + i % 3,
                              sp));
  }
  REQUIRE(crowd.size() == 65);

  const auto together = run_jobs(spec, *gpu, crowd, 65);
  REQUIRE(together.size() == 65);
  const auto alone = run_jobs(spec, *gpu, {target}, 1);
  check_same_frames(together.at("target"), alone.at("target"), "target");

  // Some of the others against their own alone-runs (one sharing the target's prompt).
  for (int i : {0, 10, 37, 63}) {
    const Job& j = crowd[size_t(i < 32 ? i : i + 1)];
    REQUIRE(j.id == "other-" + std::to_string(i));
    const auto a = run_jobs(spec, *gpu, {j}, 1);
    check_same_frames(together.at(j.id), a.at(j.id), j.id);
  }
}

TEST_CASE("tiny_v1 bf16 batch-invariant: pipelined steps give the tokens of waiting for each") {
  // Steps staged while the one before runs, their first slots fed its draws on the device
  // (future tokens), through frame chunks, round changes and preemption (a pool of 60 blocks
  // for 24 jobs): every frame equals the engine's without overlap.
  const LoadedModel m = load_model(std::string(LOOM_TESTDATA) + "/tiny_v1");
  const ModelSpec& spec = m.spec;
  auto gpu = make_cuda_backend(ComputeDType::BF16, 0, true);
  gpu->load(spec, m.weights);
  std::vector<Job> jobs;
  for (int i = 0; i < 24; i++) {
    SamplingParams sp{0.9f, 0, 1.0f, uint64_t(300 + i)};
    if (i % 3 == 1) sp.top_k = 40;
    jobs.push_back(frame_job(spec, "j" + std::to_string(i), i + 1, uint32_t(900 + i % 8), 1 + i % 3,
                             3 + i % 4, sp));
  }
  const auto piped = run_jobs(spec, *gpu, jobs, 24, true, 60);
  const auto waited = run_jobs(spec, *gpu, jobs, 24, false, 60);
  REQUIRE(piped.size() == jobs.size());
  for (const Job& j : jobs) check_same_frames(piped.at(j.id), waited.at(j.id), j.id);
}

TEST_CASE("--batch-invariant on the cuda backend refuses f32 with one clear error") {
  try {
    make_cuda_backend(ComputeDType::F32, 0, true);
    FAIL("f32 batch-invariant backend was made");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("--batch-invariant") != std::string::npos);
    CHECK(std::string(e.what()).find("bf16") != std::string::npos);
  }
}
