// The decode-step megakernel's launcher (kernels/mega/megakernel.cu): one persistent launch
// runs a whole decode step for 1–8 sequences — embed, every layer, final norm, lm_head, the
// draw — by interpreting per-SM instruction lists (instructions.h) built on the host
// (backend/cuda/mega_schedule.h). The instruction families live one file each:
//   sync.cuh            counters: waits (acquire, bounded), publishes (release), jitter
//   gemv_ops.cuh        Embed, Qkv, OProj, GateUp, Down, FinalNorm, LmHead (+ draw partials), Draw
//   attention_ops.cuh   a Qkv tile's RoPE and cache write, AttnPartial, AttnReduce
//   attention_mma.cuh   AttnPartial's scores and P·V on the tensor cores (bf16)
//   attention_groups.cuh  AttnPartial at 4-8 slots as four independent warp groups (bf16)
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"
#include "kernels/cuda_check.cuh"
#include "kernels/mega/instructions.h"
#include "kernels/sampling.cuh"

namespace loom::mega {

constexpr int kMegaThreads = 512;  // one CTA per SM: 16 warps, one GEMV row each a tile
constexpr int kMegaWarps = kMegaThreads / 32;

// One layer's weights and caches (device pointers, in a device array of `layers` entries).
struct MegaLayer {
  const void* qkv = nullptr;         // T [q_dim + 2 kv_dim, hidden]
  const void* o = nullptr;           // T [hidden, q_dim]
  const void* gate_up = nullptr;     // T [2 intermediate, hidden]
  const void* down = nullptr;        // T [hidden, intermediate]
  const float* attn_norm = nullptr;  // [hidden]
  const float* mlp_norm = nullptr;   // [hidden]
  void* k_cache = nullptr;           // T [cache slots, kv_heads, head_dim]
  void* v_cache = nullptr;           // same
};

// Per LmHead tile and slot: the tile's best draw key and its id (relative to the logit range's
// first column; -1: none in range or inactive).
struct MegaDrawPartial {
  float v;
  int32_t id;
};

static_assert(kMmaKParts == kMegaWarps / 2, "a row group's k parts: one warp each");

// The tensor maps of the tensor-core GEMVs' weights, one launch parameter (so no fence before
// their first use; the parameter space holds 32,764 bytes), in mega_tmap_index's order. A weight
// [n, k] is seen as dims {64 columns, n rows, k / 64 chunks} with strides {k · 2, 128} bytes; a box
// of {64, 8, 4} (the tail map: the last segment's chunks) lands as [chunk][row][64 columns] with
// the 128-byte swizzle, 16-byte granule u of row r at u ^ r: one copy a 4 KB segment, whose
// ldmatrix rows fall on 8 distinct bank groups (gemv_mma.cuh).
constexpr int kMegaMaxTmaps = 224;
struct MegaTmaps {
  CUtensorMap m[kMegaMaxTmaps];
};
struct MegaNoTmaps {};  // the launch parameter of the instantiations without tensor-core GEMVs

struct MegaArgs {
  DType t = DType::BF16;  // weights, activations and KV cache: BF16 or F32
  MegaDims d;
  // The schedule: CTA c runs instrs[prog_begin[p] .. prog_begin[p + 1]), p = cta_program[c]
  // (null: p = c; the tests permute it).
  const MegaInstruction* instrs = nullptr;
  const int32_t* prog_begin = nullptr;  // [num_ctas + 1]
  const int32_t* cta_program = nullptr;
  int num_ctas = 0;
  MegaSyncHeader* sync = nullptr;  // the sync block: header, then mega_num_counters(d) counters

  // Weights.
  const MegaLayer* layers = nullptr;    // [layers]
  const void* embed = nullptr;          // T [vocab rows, hidden]
  const float* pos_spatial = nullptr;   // [spatial_rows, hidden] (frame models; null: none)
  const float* pos_temporal = nullptr;  // [temporal_rows, hidden]
  int frame_slots = 0;
  const float* final_norm = nullptr;  // [hidden]
  const void* lm_head = nullptr;      // T [vocab rows, hidden]
  const float* inv_freq = nullptr;    // [head_dim / 2]
  float eps = 1e-6f;
  float attn_scale = 1.0f;  // 1 / sqrt(head_dim)

  // The step's inputs (one slot per sequence; slot b is sequence b).
  const int32_t* tokens = nullptr;        // [batch]
  const int32_t* positions = nullptr;     // [batch]
  const int32_t* cache_slot = nullptr;    // [batch]
  const int32_t* kv_len = nullptr;        // [batch] cached keys before this step's slot
  const int32_t* block_tables = nullptr;  // [batch, bt_stride]
  int bt_stride = 0, block_size = 0;
  FastDiv block_div;  // x / block_size (a key's block; exact: mega_step checks the range)
  const loom::gpu::SampleParamsDev* params = nullptr;  // [batch]
  int gemv_stages = 2;               // weight ring slots per warp (mega_gemv_stages)
  int gemv_early = 2;                // of them, in flight while an instruction waits
  int gemv_early_down = 2;           // Down's own gemv_early
  bool gemv_ahead = true;            // the ring runs on into the next GEMV instructions
  bool weights_evict_first = true;   // the ring's copies as L2 evict_first (tma.cuh, l2_policy)
  bool attn_apart = false;           // AttnPartial's buffers beside the ring (mega_smem_bytes)
  bool attn_in_xs = false;           // else within the staged input's bytes (mega_attn_in_xs)
  int reduce_chunk = 0;              // AttnReduce's partitions a chunk, at most (0: as fit)
  int attn_min_keys = 64;            // mega_partition_keys' min_keys (32 and 64 measured alike)
  int gemv_inflight = 0;             // segments a warp keeps in flight once staged (0: stages)
  bool gemv_mma = false;             // GEMVs on the tensor cores (mega_gemv_mma; gemv_mma.cuh)
  const MegaTmaps* tmaps = nullptr;  // gemv_mma: their weights' maps (host memory; a parameter)
  int sample_lo = 0, sample_hi = 0;  // the logit range drawn from; ids relative to sample_lo

  // Workspace.
  float* x = nullptr;       // [batch, hidden] residual stream
  void* qkv = nullptr;      // T [batch, qkv_rows]
  void* attn = nullptr;     // T [batch, q_dim] in OProj's staged order (mega_xs_elem)
  void* gu = nullptr;       // T [batch, 2 intermediate]: gate, up; gemv_mma: act [batch,
                            // intermediate] in Down's staged order (mega_xs_elem)
  void* h_last = nullptr;   // T [batch, hidden] in LmHead's staged order (mega_xs_elem)
  float* logits = nullptr;  // [batch, logits_ld]
  int logits_ld = 0;
  float* attn_part = nullptr;  // [batch, kv_heads, max_parts, mega_partial_floats(G, head_dim)]
  int max_parts = 0;
  MegaDrawPartial* draw_part = nullptr;  // [lm_head tiles, batch]
  int32_t* tokens_out = nullptr;         // [batch] the draws (-1: inactive)

  // Debugging and faults: a wait gives up after timeout_ns (the step is then abandoned by
  // every CTA and MegaSyncHeader::trap_* say where); jitter_seed != 0 sleeps a pseudo-random
  // 0–4 µs at every wait and publish.
  uint64_t timeout_ns = 2000000000ull;
  uint32_t jitter_seed = 0;
  // Benchmarks only (wrong results): GEMV rows skip their dot products (everything else —
  // copies, waits, staging, publishes — kept); waits return at once (the streaming without
  // the dataflow).
  bool skip_math = false;
  bool skip_waits = false;
  // Benchmarks only: bytes the dynamic buffer's layout starts past its 128-byte boundary (a
  // multiple of 16; the ring's alignment, bench/NOTES-cuda.md sessions 56-57).
  int smem_skew = 0;
  // Per-phase timing (null: off): thread 0 of each CTA records, for the i-th instruction of
  // its program, MegaTraceEntry trace[program · trace_stride + i] (globaltimer ns).
  struct MegaTraceEntry* trace = nullptr;
  int trace_stride = 0;
};

static_assert(
    sizeof(MegaArgs) + sizeof(MegaTmaps) <= 32764,
    "the launch's parameters (MegaArgs, MegaTmaps) within the 32,764 bytes a kernel takes");

struct MegaTraceEntry {
  uint64_t start = 0;   // before the instruction's first wait
  uint64_t end = 0;     // after its last publish
  uint64_t waited = 0;  // spent spinning in its waits
  uint64_t staged = 0;  // GEMVs: when the input was staged (0: not a GEMV)
  uint32_t op = 0, layer = 0;
};

// The dynamic buffer starts on a 128-byte boundary and each of its regions does (kMegaAlign):
// with the ring 16 bytes past one (where the static MegaShared left it) a batch-1 step took
// 76 us longer (H100, bench/NOTES-cuda.md session 57). With the tensor-core GEMVs on a
// 1,024-byte one (kMegaMmaAlign): the swizzled boxes' pattern repeats every 1,024 bytes, and
// the staged input before the ring is a multiple of it (batch 4-8 × k a multiple of 512, bf16).
constexpr size_t kMegaAlign = 128;
constexpr size_t kMegaMmaAlign = 1024;

// Bytes of the staged GEMV input, T [batch, max(hidden, q_dim, intermediate)], kMegaAlign-aligned.
__host__ __device__ inline size_t mega_xs_bytes(const MegaDims& d, size_t elt) {
  const int k = d.hidden > d.q_dim() ? d.hidden : d.q_dim();
  const size_t bytes = size_t(d.batch) * size_t(k > d.intermediate ? k : d.intermediate) * elt;
  return (bytes + kMegaAlign - 1) / kMegaAlign * kMegaAlign;
}

// Dynamic shared memory: the staged GEMV input, the weight ring (gemv_stages slots a warp), and
// AttnPartial's buffers — over the first two (attn_apart false: the weight stream stops at an
// AttnPartial with work where they reach into the ring) or after them (true: the stream runs on
// through attention and the partition's K and V are staged an instruction early; the kernel takes
// it at 1-2 slots), and kMegaAlign bytes to put its start on a boundary. mma: the tensor-core
// GEMVs' partials too (gemv_mma.cuh).
size_t mega_smem_bytes(const MegaDims& d, DType t, int gemv_stages, bool attn_apart, bool mma);
// The deepest weight ring (stages per warp, 2-3) that fits `smem_optin` bytes a block; 0: none.
int mega_gemv_stages(const MegaDims& d, DType t, int smem_optin, bool attn_apart, bool mma);

// Whether AttnPartial's buffers, at the dynamic buffer's start, fit in the staged input's bytes,
// which are dead between a Qkv and the next GEMV's staging (batch 8 on Terra: 75,840 of
// 90,112): then the weight stream runs on through attention, as with attn_apart; else it stops
// at an AttnPartial with work (its buffers reach into the ring).
bool mega_attn_in_xs(const MegaDims& d, DType t);
// Whether the layer and lm_head GEMVs can run on the tensor cores (gemv_mma.cuh): bf16, 4-8
// slots, every input length a multiple of 512 (mega_mma_fits), tiles of multiples of 16 rows,
// and their tensor maps within MegaTmaps.
bool mega_gemv_mma(const MegaDims& d, DType t);
// Encodes the maps of the weights in layers[0, d.layers) and lm_head (d.vocab rows) into out
// (mega_tmap_index's order); an error names the weight.
loom::gpu::Status mega_encode_tmaps(const MegaDims& d, const MegaLayer* layers, const void* lm_head,
                                    MegaTmaps& out);

// Launches one step (cooperative: every CTA resident, one per SM). Capturable into a graph.
loom::gpu::Status mega_step(const MegaArgs& a, cudaStream_t stream);

}  // namespace loom::mega
