// cuda_bench: the CUDA kernels' and backend's measurements, written as JSON (argv[1]) and a table:
//   - device-to-device copy bandwidth (bytes read + written), the ceiling of every ratio;
//   - each op family's microbenchmark (tests/cuda/bench/<family>.cpp, the table in bench.h):
//     validated against the family's reference, then timed, GB/s against the copy bandwidth —
//     GEMV vs cuBLAS, linear_fixed vs cuBLAS and its paths, decode attention (CUDA cores and
//     tensor cores: bench_attention.cpp), the lm_head GEMV and device draw, the 88-GEMV chain,
//     the norms, MLP activations, convert, embedding assembly and positions;
//   - the backend end to end on a Terra-size model (tests/cuda/bench/backend.cpp): load, decode
//     steps against the floor, per-kernel times, the graph without kernel families, draw cost,
//     a 3-frame prefill.
// `cuda_bench OUT.json --attention-case B CTX [KV [fp8|bf16 [BS]]]` times one decode attention
// case alone (for ncu; KV kv heads of 8 q heads, default Terra's 4; fp8: an e4m3 cache; BS KV
// slots a cache block, default 16).
// `cuda_bench OUT.json --gemm-rows-case M[,M…] [power]` times Terra's 22 layers of GEMMs through
// cuBLAS at each row count (a 256-row decode step against one with action slots: 262, 268),
// with power an ~8 s window each for scripts/power_windows.py.
// `cuda_bench OUT.json --gemm-energy-case [M [NAME,…]]` measures joules a replay of those GEMMs
// and lm_head (or the named ones: qkv, o, gate_up, down, lm_head) at M rows (default 256) for
// cuBLAS's default and each cuBLASLt heuristic algorithm near its speed (NVML's energy counter,
// under the board's power cap).
// `cuda_bench OUT.json --prefill-case SLOTS SEQS [fp8|bf16]` times the prefill kernel on SEQS
// sequences prefilling SLOTS slots at each depth of its ring and register build, checking the
// bits alike.
// `cuda_bench OUT.json --overlap-case B CTX [fp8]` times that attention case beside Terra's four
// layer GEMMs (m = B) on a second stream: alone, at once, one after the other.
// `cuda_bench OUT.json --shared-case B CTX G KEYS [fp8]` times the TMA decode kernel with groups
// of G sequences sharing their first KEYS keys' blocks against each with its own, each config.
// `cuda_bench OUT.json --step-case B CTX[,CTX…] [fp8] [scatter] [power]` splits a Terra-size decode
// step of B sequences on the backend's default KV block size (64, as `loom run` on cuda; 16
// before session 45): its graph replayed with each kernel family left out (bf16 or e4m3 KV;
// scatter: the sequences' blocks interleaved as running decode steps leave them; power: whole,
// attention alone, without attention and without lm_head + draw, ~8 s each, with their
// wall-clock windows).
// `cuda_bench OUT.json --batch-invariant` runs the backend measurements in batch-invariant mode
// (compare its decode and prefill rows with a default run: the cost of --batch-invariant).
// `cuda_bench OUT.json --only KEY[,KEY…]` runs those microbenchmarks alone (no backend part).
// `cuda_bench OUT.json --megakernel` compares the decode-step megakernel with the graph path
// (tests/cuda/bench/mega.cpp) and prints its per-op trace.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/cuda/cuda_backend.h"
#include "bench/bench.h"
#include "bench_attention.h"
#include "kernels/cuda_check.cuh"

using namespace loom;
using json = nlohmann::json;

namespace {

// "a,b,c" → {"a", "b", "c"}: --only's keys, --step-case's contexts, --gemm-rows-case's rows.
std::vector<std::string> split_commas(const char* list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

std::vector<int> int_list(const char* list) {
  std::vector<int> out;
  for (const std::string& item : split_commas(list)) out.push_back(std::stoi(item));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string reason;
  if (cuda_device_count(&reason) == 0) {
    std::printf("SKIPPED: no CUDA device (%s)\n", reason.c_str());
    return 77;
  }
  const std::string out_path = argc > 1 ? argv[1] : "cuda_bench.json";
  const std::string mode = argc > 2 ? argv[2] : "";
  const bool invariant = mode == "--batch-invariant";
  cudaStream_t stream;
  LOOM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  int sms = 0;
  LOOM_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  if (argc > 4 && mode == "--attention-case") {
    // One decode attention case alone (e.g. under ncu): cuda_bench OUT --attention-case B CTX
    // [KV_HEADS [fp8|bf16 [BLOCK_SIZE]]]
    const int bs = argc > 7 ? std::atoi(argv[7]) : 16;
    if (bs < 1 || bs > 1024 || (bs & (bs - 1))) {
      std::fprintf(stderr,
                   "cuda_bench: --attention-case BLOCK_SIZE %s: expected a power of 2, 1-1024\n",
                   argv[7]);
      return 2;
    }
    std::ofstream(out_path) << attention_decode_case(stream, sms, std::atoi(argv[3]),
                                                     std::atoi(argv[4]),
                                                     argc > 5 ? std::atoi(argv[5]) : 4,
                                                     argc > 6 && std::string(argv[6]) == "fp8", bs)
                                   .dump(2);
    return 0;
  }
  if (argc > 6 && mode == "--shared-case") {  // cuda_bench OUT --shared-case B CTX G KEYS [fp8]
    std::ofstream(out_path) << attention_shared_case(stream, std::atoi(argv[3]), std::atoi(argv[4]),
                                                     std::atoi(argv[5]), std::atoi(argv[6]),
                                                     argc > 7 && std::string(argv[7]) == "fp8")
                                   .dump(2);
    return 0;
  }
  if (argc > 4 && mode == "--pipeline-case") {  // OUT --pipeline-case B CTX [fp8] [L] [power]
    std::ofstream(out_path) << attention_pipeline_case(stream, std::atoi(argv[3]),
                                                       std::atoi(argv[4]),
                                                       argc > 5 && std::string(argv[5]) == "fp8",
                                                       argc > 6 ? std::atoi(argv[6]) : 22,
                                                       argc > 7 && std::string(argv[7]) == "power")
                                   .dump(2);
    return 0;
  }
  if (argc > 4 && mode == "--prefill-case") {  // OUT --prefill-case SLOTS SEQS [fp8|bf16]
    const int slots = std::atoi(argv[3]), seqs = std::atoi(argv[4]);
    const std::string kv = argc > 5 ? argv[5] : "bf16";
    // A case's sequences hold at most a 22-frame Terra sequence's 14,550 slots (make_setup).
    if (slots < 1 || slots > 14550 || seqs < 1 || seqs > 4096 || (kv != "fp8" && kv != "bf16") ||
        argc > 6) {
      std::fprintf(
          stderr,
          "cuda_bench: --prefill-case: expected SLOTS (1-14550) SEQS (1-4096) [fp8|bf16]\n");
      return 2;
    }
    std::ofstream(out_path) << attention_prefill_case(stream, slots, seqs, kv == "fp8").dump(2);
    return 0;
  }
  if (argc > 4 && mode == "--overlap-case") {  // cuda_bench OUT --overlap-case B CTX [fp8]
    std::ofstream(out_path) << attention_overlap_case(stream, std::atoi(argv[3]),
                                                      std::atoi(argv[4]),
                                                      argc > 5 && std::string(argv[5]) == "fp8")
                                   .dump(2);
    return 0;
  }
  const std::vector<std::string> only =
      argc > 3 && mode == "--only" ? split_commas(argv[3]) : std::vector<std::string>{};
  try {
    json r;
    auto be = make_cuda_backend(ComputeDType::BF16, 0, invariant);
    r["batch_invariant"] = invariant;
    r["device"] = be->device_info().name;
    const double bw = be->measure_copy_bandwidth_gbps();
    r["copy_gbps"] = bw;
    std::printf("device %s, copy bandwidth %.0f GB/s (read + write)\n",
                r["device"].get<std::string>().c_str(), bw);

    // cuda_bench OUT --step-case B CTX[,CTX…] [fp8] [scatter] [power]
    if (argc > 4 && mode == "--step-case") {
      const std::vector<int> ctxs = int_list(argv[4]);
      const std::vector<std::string> rest(argv + 5, argv + argc);
      auto has = [&](const char* w) {
        return std::find(rest.begin(), rest.end(), w) != rest.end();
      };
      r["step_case"] = bench::bench_step_case(*be, std::atoi(argv[3]), ctxs,
                                              has("fp8") ? KvDType::FP8 : KvDType::BF16,
                                              has("scatter"), has("power"));
      std::ofstream(out_path) << r.dump(2) << "\n";
      return 0;
    }
    if (mode == "--megakernel") {
      bench::bench_megakernel(*be, bw, r);
      std::ofstream(out_path) << r.dump(2) << "\n";
      std::printf("\nwrote %s\n", out_path.c_str());
      return 0;
    }
    gpu::Gemm gemm;
    gemm.init(stream);
    const bench::Context ctx{stream, sms, bw, &gemm};
    // cuda_bench OUT --gemm-rows-case M[,M…] [power]
    if (argc > 3 && mode == "--gemm-rows-case") {
      r["gemm_rows_case"] = bench::bench_gemm_rows(ctx, int_list(argv[3]),
                                                   argc > 4 && std::string(argv[4]) == "power");
      std::ofstream(out_path) << r.dump(2) << "\n";
      return 0;
    }
    // cuda_bench OUT --gemm-energy-case [M [NAME,…]]
    if (mode == "--gemm-energy-case") {
      r["gemm_energy_case"] =
          bench::bench_gemm_energy(ctx, argc > 3 ? std::atoi(argv[3]) : 256,
                                   argc > 4 ? split_commas(argv[4]) : std::vector<std::string>{});
      std::ofstream(out_path) << r.dump(2) << "\n";
      return 0;
    }
    for (const bench::Family& f : bench::families()) {
      if (!only.empty() && std::find(only.begin(), only.end(), f.key) == only.end()) continue;
      std::printf("\n== %s\n", f.key);
      r[f.key] = f.run(ctx);
    }
    if (only.empty()) bench::bench_backend(*be, bw, r);
    std::ofstream(out_path) << r.dump(2) << "\n";
    std::printf("\nwrote %s\n", out_path.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuda_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
