// The persistent decode-step megakernel (issue 15): its instruction types, their contracts and
// the counter layout that synchronises them. Plain C++ (no CUDA include): the host builds and
// checks the per-SM instruction lists (backend/cuda/mega_schedule.h), the kernel interprets
// them, and both read the contracts from the functions below, so there is one definition of
// "what an instruction waits for and what it publishes".
//
// Shape of a step. One launch runs one decode step for `batch` (1–8) sequences, one new slot
// each, in bf16 (f32 for the exact comparison with the CPU backend): embed, `layers` layers,
// final norm, lm_head, the draw. One CTA per SM (cooperative launch, so all are resident);
// CTA s walks its own list `programs[s]` in order. Every op is cut into *units* (a GEMV tile
// of output rows, an attention split, a norm row …); an instruction is (op, layer, units
// [begin, end)) and the CTA runs its units in increasing order. Before a unit it waits on one
// counter; after a unit's stores it publishes +1 on one counter — consecutive units of one
// counter together, +k once after the k units' stores. No grid barrier exists.
//
// Counters and epochs (the Mirage choice: counters are never reset between steps).
//   The sync block in device memory is MegaSyncHeader followed by mega_num_counters() uint32
//   counters. Each unit adds exactly 1 to its publish counter per step, so after step e (1, 2,
//   …) a counter whose group has n units holds e·n. A CTA reads `step` once at kernel start
//   (the previous launch has completed: stream order), takes e = step + 1 and waits for a
//   counter to reach e·n, comparing with wrap-around, (int32_t)(value − e·n) ≥ 0: the value
//   never runs ahead of its target by more than one step's n, so uint32 overflow is harmless
//   and no host intervention is needed between steps. After its last instruction each CTA adds
//   1 to `done`; the CTA that brings `done` to e·num_ctas stores step = e (release), which the
//   next launch reads. Why not reset: a replayed graph's arguments are frozen and a reset
//   needs either a grid barrier at the end of the step or an extra memset node per replay;
//   monotonic counters need neither.
//   Steps never overlap: one launch is one step, and consecutive launches are ordinary stream
//   (graph) dependencies, not PDL edges, because the first instruction of step e+1 (embed)
//   reads the token the draw of step e wrote, which the host stages between steps.
//   The host zeroes the whole sync block (cudaMemsetAsync, before the launch) at graph
//   capture, on a batch-bucket change (a new list and a new counter layout), and after any
//   failed launch (a trapped wait leaves counters mid-step). Never per step.
//
// Memory ordering.
//   publish: the threads that stored the unit's outputs reach a CTA (or named) barrier, then
//     one thread runs `red.release.gpu.global.add.u32` on the counter (release orders every
//     store of the CTA before it, the barrier having made them visible to that thread).
//   wait: one thread spins on `ld.acquire.gpu.u32` (back to back, a sleep every 16th poll),
//     then the CTA barrier; the spin gives up after a bounded time (globaltimer deadline),
//     first writing the counter index and value to MegaSyncHeader::trap_*, so a deadlock fails
//     a test instead of hanging it (sync.cuh).
//   Activations written by other SMs (x, qkv, attention partials, attn, gate_up, h_last,
//     logits, draw partials, the KV cache rows written this step) are read only through L2:
//     `ld.global.cg`, `cp.async.cg`, or TMA after `fence.proxy.async.global`; never
//     `ld.global.nc` / `__ldg`, whose cache is not coherent with other SMs' stores.
//   Weights never change during a launch and depend on no counter, so a CTA's warps start the
//   bulk copies of an instruction's first weight segments before its wait (gemv_ops.cuh).
//   Shared memory that ordinary stores wrote and a later bulk copy overwrites: the writing
//   threads run `fence.proxy.async.shared::cta` before the CTA barrier after which the copy
//   may be issued (attention's buffers over the ring: attn_fence_ring), and the issuing lane
//   fences again before each copy (its own reads of the slot; pump).
//
// Buffer reuse (write-after-read). Each buffer is rewritten at the next layer only by an op
// that waits, through a chain of whole-op counters, for every reader of the previous contents:
//   qkv   written by Qkv(l+1), which waits Down(l) ← GateUp(l) ← OProj(l) ← AttnReduce(l) ←
//         AttnPartial(l) (the readers of q);
//   attn  written by AttnReduce(l+1) ← … ← OProj(l+1)'s wait chain ← Down(l) ← … ← OProj(l);
//   gu    written by GateUp(l+1) ← OProj(l+1) ← … ← Qkv(l+1) ← Down(l) (its reader);
//   x     rewritten in place (columns) by OProj(l) and Down(l): OProj(l) runs after every
//         Qkv(l) tile read x (via AttnReduce(l)), Down(l) after every GateUp(l) tile read it;
//   attention partials: written by AttnPartial(l+1), after AttnReduce(l) read them (as qkv).
// The host checker (check_mega_schedule) verifies these orders from a separate description of
// each op's reads and writes.
//
// Reduction order (so bf16 and fp32 results are deterministic and independent of the SM
// count, the unit → SM map and, but for the GEMVs of gemv_mma at 4-8 slots, the batch;
// --batch-invariant takes the graph path):
//   RMSNorm (Qkv, GateUp, FinalNorm prologues): Σ x² in fp32, thread t of kMegaNormThreads
//     summing the 4-element groups t, t + T, t + 2T … in order (each group's 4 squares left to
//     right), then a xor-shuffle tree (16, 8, 4, 2, 1) per warp and the warps' sums in warp
//     order. Every CTA that normalises a row computes the
//     same bits, so the redundant per-instruction norms agree with each other.
//   GEMV row (Qkv, OProj, GateUp, Down, LmHead): one warp per output row, fp32; lane l sums
//     the 8-element chunks c ≡ l (mod 32) of k in increasing c, each chunk's 8 products left
//     to right, then the xor-shuffle tree. Depends on k only. At 4-8 slots in bf16 with
//     MegaArgs::gemv_mma (gemv_mma.cuh): the mma.sync k-steps of each of 8 k parts in order,
//     then the parts summed 0 … 7. Outputs: GateUp rounds to the
//     compute dtype; Qkv rotates a pair's two fp32 dots (rope_pair) and rounds once; OProj and Down
//     add their fp32 result to x once (x += dot by red.add in the L2: one writer per element);
//     LmHead stores fp32
//     logits.
//   SiLU·mul (GateUp's tile end): T(silu(g) · u) per element of the rounded g and u, as
//     GemvIn::SiluMul.
//   Attention: scores, softmax pieces and P·V per partition of mega_partition_keys keys on
//     CUDA cores (in bf16 the two products on the tensor cores,
//     attention_mma.cuh), in the order attention_ops.cuh's header gives; each partition leaves its
//     unnormalised (acc, max, sum) in its own slot, whichever split computed it, and
//     AttnReduce folds partitions 0, 1, … P−1 in order. So the bits depend on kv_len and the
//     partition size (kv_len and attn_splits), never on the SMs or the unit → SM map.
//   Draw: each LmHead instruction leaves, per slot, its best (value, id) over its tiles —
//     greedy: logit; sampled: Gumbel-max key z/T − log(−log u), u = philox_uniform(...) as
//     sampler.h — with the lowest id winning ties, in its first tile's partial (its other
//     tiles' say none, id −1); Draw folds the tiles in index order with the same total order,
//     so the token is the graph path's token whatever the tiles' split over the SMs.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define LOOM_MEGA_HD __host__ __device__ __forceinline__
#else
#define LOOM_MEGA_HD inline
#endif

namespace loom::mega {

constexpr int kMegaMaxBatch = 8;           // slots of one step (one per sequence)
constexpr int kMegaPartitionKeys = 256;    // keys of one attention partition, at most
constexpr int kMegaMinPartitionKeys = 32;  // and at least (a warp's keys)
constexpr int kMegaMaxSplits = 32;         // AttnPartial units per (slot, KV head) by default
constexpr int kMegaMaxTileRows = 64;       // rows of a layer GEMV tile, at most
constexpr int kMegaNormThreads = 512;      // threads of the RMSNorm sum (its order)
constexpr uint32_t kMegaNoCounter = ~0u;   // "waits on nothing" / "publishes nothing"
// AttnPartial with the tensor-core GEMVs (attention_groups.cuh): the CTA's warps as independent
// groups, each folding its own chain of partitions of kAttnGroupKeys keys into one partial slot.
constexpr int kAttnGroups = 4;
constexpr int kAttnGroupKeys = 64;
// Whether that path fits a KV head of G query heads at head_dim hd: G ≤ 8 (one m16 row block of
// the mma, rows 8-15 discarded), head_dim 64 or 128 (whole swizzled rows).
LOOM_MEGA_HD bool attn_groups_fit(int G, int hd) {
  return G <= 8 && (hd == 64 || hd == 128);
}

// Keys of an attention partition when a (slot, KV head) has n_keys keys over `splits` splits:
// the smallest power of two in [min_keys, 256] (min_keys a power of two ≥ 32; the default
// MegaArgs::attn_min_keys) with splits · keys ≥ n_keys, so a short context spreads over more
// splits (at batch 1 on Terra, 600 keys take 10 splits of 64 keys, not 3 of 256) and a long one
// keeps 256-key partitions. Partitions a (slot, KV head): ≤ max(splits, n_keys / 256).
LOOM_MEGA_HD int mega_partition_keys(int n_keys, int splits, int min_keys) {
  int k = min_keys;
  while (k < kMegaPartitionKeys && k * splits < n_keys) k *= 2;
  return k;
}

// Floats of one partition's partial of a (slot, KV head): acc [G, head_dim + 2] with each
// head's max and sum after its acc, padded to 16 bytes (AttnReduce copies them by cp.async).
LOOM_MEGA_HD int mega_partial_floats(int G, int head_dim) {
  return (G * (head_dim + 2) + 3) / 4 * 4;
}

// The ops of a step, in the order of the sequential forward pass (cuda_forward.cpp's GEMV
// schedule). Unit u of each op and its contract:
enum class MegaOp : uint8_t {
  // Embed — units: column tiles of x, embed_cols each (the last may be short), all slots.
  //   Writes x[b, cols] (fp32) = embed[token b] (+ pos_spatial + pos_temporal for frame
  //   models; an action slot of a Linear action projection: w · action + b instead of the
  //   embedding row). Waits: nothing. Publishes: Embed, +1 per tile (n = embed tiles).
  Embed,
  // Qkv(l) — units: tiles of R = rows_per_tile rows of the fused [q; k; v] weight
  //   ([heads + 2 kv_heads] · head_dim rows; R is even and divides head_dim, so a tile never
  //   straddles heads). The rows of a tile are RoPE pairs: tile j of a head holds its rows i
  //   and i + head_dim/2 for i in [j·R/2, (j+1)·R/2) (mega_qkv_row), so the tile rotates its
  //   own outputs. Reads x (all of every slot's row, RMSNorm with attn_norm in the prologue).
  //   Writes, per slot b: a query head's rows rotated into qkv[b, rows]; k head g's rows
  //   rotated and v head g's rows into the layer's cache at cache_slot[b] (compute dtype,
  //   rope_kv_write's arithmetic on the fp32 dots).
  //   Waits: l = 0: Embed, all tiles; l > 0: Down(l−1), all tiles.
  //   Publishes: Qkv(l, g), g = the KV head whose group the tile's rows serve (query head h
  //   serves g = h / G; k and v rows of head g serve g); n = (G + 2) · head_dim / R.
  Qkv,
  // AttnPartial(l) — units: u = (b · kv_heads + g) · attn_splits + j. Reads kv_len[b] on the
  //   device and computes partitions p = j, j + splits, j + 2·splits … < ceil((kv_len[b] + 1)
  //   / K), K = mega_partition_keys(kv_len[b] + 1, splits, MegaArgs::attn_min_keys), of slot
  //   b's keys for the G query heads of group g, writing each partition's unnormalised (acc,
  //   max, sum) to partials[b, g, p]. A split with no partition reads, writes and publishes
  //   nothing; split 0 (which always has partition 0) publishes 1 + the idle splits' count, so
  //   the group still reaches n = splits, once every busy split arrived. Neither the list nor
  //   the graph depends on the context length.
  //   With the tensor-core GEMVs (attention_groups.cuh) K = kAttnGroupKeys and the unit's
  //   kAttnGroups warp groups take partitions j + splits·w + kAttnGroups·splits·i each, folding
  //   them into one partial in slot j + splits·w (its first partition's index): the slots with
  //   work are 0 … min(parts, kAttnGroups · splits) − 1, which AttnReduce folds.
  //   Waits: Qkv(l, g), all its tiles. Publishes: AttnPartial(l, b · kv_heads + g), n = splits.
  AttnPartial,
  // AttnReduce(l) — units: u = b · kv_heads + g. Folds partitions (or slots) 0 … P−1 of
  //   (b, g) in order and writes attn[b, G heads of g] (compute dtype, in the order OProj
  //   stages its input).
  //   Waits: AttnPartial(l, u), all splits. Publishes: AttnReduce(l), n = batch · kv_heads.
  //   The kernel runs unit u inside the AttnPartial split whose publish completes
  //   AttnPartial(l, u); the scheduled instruction is a no-op.
  AttnReduce,
  // OProj(l) — units: tiles of rows_per_tile rows of o ([hidden] rows). Reads attn (every
  //   head of every slot). x[b, tile rows] += o · attn[b] (fp32).
  //   Waits: AttnReduce(l), all. Publishes: OProj(l), n = o tiles.
  OProj,
  // GateUp(l) — units: tiles of rows_per_tile rows of [gate; up] ([2 · intermediate] rows,
  //   rows_per_tile a multiple of 16). A tile's rows are gate / up pairs (mega_gate_up_row).
  //   Reads x (RMSNorm with mlp_norm in the prologue). Writes act = T(silu(g) · u) of its rows
  //   / 2 columns into gu, in the order Down stages it (mega_xs_elem).
  //   Waits: OProj(l), all. Publishes: GateUp(l), n = gate_up tiles.
  GateUp,
  // Down(l) — units: tiles of rows_per_tile rows of down ([hidden] rows). Reads act (all of
  //   it, as GateUp wrote it). x[b, tile rows] += down · act[b] (fp32).
  //   Waits: GateUp(l), all. Publishes: Down(l), n = down tiles.
  Down,
  // FinalNorm — units: slots b. h_last[b] = bf16(RMSNorm(x[b]) · final_norm) (in the order
  //   LmHead stages its input).
  //   Waits: Down(layers − 1), all. Publishes: FinalNorm, n = batch.
  FinalNorm,
  // LmHead — units: tiles of lm_rows_per_tile vocabulary rows (the last may be short).
  //   Reads h_last (every slot). Writes logits[b, tile rows] (fp32) and the tile's draw
  //   partial per slot (the instruction's best key and id inside the sampled range in its
  //   first tile's, none in the others'; "Reduction order", Draw).
  //   Waits: FinalNorm, all. Publishes: LmHead, n = lm_head tiles.
  LmHead,
  // Draw — units: slots b. Folds slot b's draw partials of every tile in index order and
  //   writes tokens[b]. Waits: LmHead, all. Publishes nothing: the host reads the tokens
  //   after the launch (the CTA's `done` increment orders the store before the next step).
  Draw,
};
constexpr int kMegaOps = 10;

LOOM_MEGA_HD const char* mega_op_name(MegaOp op) {
  switch (op) {
    case MegaOp::Embed:
      return "embed";
    case MegaOp::Qkv:
      return "qkv";
    case MegaOp::AttnPartial:
      return "attn_partial";
    case MegaOp::AttnReduce:
      return "attn_reduce";
    case MegaOp::OProj:
      return "o_proj";
    case MegaOp::GateUp:
      return "gate_up";
    case MegaOp::Down:
      return "down";
    case MegaOp::FinalNorm:
      return "final_norm";
    case MegaOp::LmHead:
      return "lm_head";
    case MegaOp::Draw:
      return "draw";
  }
  return "?";
}

// Ops that run once per layer (the others once per step, with layer 0).
LOOM_MEGA_HD bool mega_per_layer(MegaOp op) {
  return op >= MegaOp::Qkv && op <= MegaOp::Down;
}

// One instruction: 16 bytes, one vector load. Units [begin, end) of op `op` at `layer`.
struct MegaInstruction {
  uint8_t op = 0;        // MegaOp
  uint8_t reserved = 0;  // zero
  uint16_t layer = 0;    // 0 for ops that run once per step
  uint32_t begin = 0;    // first unit
  uint32_t end = 0;      // one past the last unit
  uint32_t pad = 0;      // zero (keeps the 16-byte size)
};
static_assert(sizeof(MegaInstruction) == 16, "an instruction is four 32-bit words");

// Head of the sync block in device memory; the counters follow it.
struct MegaSyncHeader {
  uint32_t step = 0;          // steps completed since the host zeroed the block
  uint32_t done = 0;          // CTAs that finished their list, over all steps
  uint32_t trap_counter = 0;  // a trapped wait's counter index + 1 (0: none)
  uint32_t trap_value = 0;    // the value it had
};
static_assert(sizeof(MegaSyncHeader) == 16, "the counters start 16 bytes in");

// Everything the contracts depend on: the model's dimensions, the step's batch and the tiling
// chosen by the host (build_mega_schedule). Passed to the kernel by value.
struct MegaDims {
  int layers = 0, hidden = 0, heads = 0, kv_heads = 0, head_dim = 0, intermediate = 0;
  int vocab = 0;
  int batch = 0;             // slots of the step, 1..kMegaMaxBatch
  int rows_per_tile = 0;     // output rows of a Qkv / OProj / GateUp / Down tile
  int lm_rows_per_tile = 0;  // vocabulary rows of an LmHead tile
  int embed_cols = 0;        // columns of x per Embed tile
  int attn_splits = 0;       // AttnPartial units per (slot, KV head)

  LOOM_MEGA_HD int group_size() const { return heads / kv_heads; }  // G
  LOOM_MEGA_HD int q_dim() const { return heads * head_dim; }
  LOOM_MEGA_HD int kv_dim() const { return kv_heads * head_dim; }
  LOOM_MEGA_HD int qkv_rows() const { return q_dim() + 2 * kv_dim(); }
};

LOOM_MEGA_HD int mega_ceil_div(int a, int b) {
  return (a + b - 1) / b;
}

// Units of one op instance (one layer of a per-layer op).
LOOM_MEGA_HD int mega_units(const MegaDims& d, MegaOp op) {
  switch (op) {
    case MegaOp::Embed:
      return mega_ceil_div(d.hidden, d.embed_cols);
    case MegaOp::Qkv:
      return d.qkv_rows() / d.rows_per_tile;
    case MegaOp::AttnPartial:
      return d.batch * d.kv_heads * d.attn_splits;
    case MegaOp::AttnReduce:
      return d.batch * d.kv_heads;
    case MegaOp::OProj:
      return mega_ceil_div(d.hidden, d.rows_per_tile);
    case MegaOp::GateUp:
      return mega_ceil_div(2 * d.intermediate, d.rows_per_tile);
    case MegaOp::Down:
      return mega_ceil_div(d.hidden, d.rows_per_tile);
    case MegaOp::FinalNorm:
      return d.batch;
    case MegaOp::LmHead:
      return mega_ceil_div(d.vocab, d.lm_rows_per_tile);
    case MegaOp::Draw:
      return d.batch;
  }
  return 0;
}

// Counter groups of an op instance (0: it publishes nothing).
LOOM_MEGA_HD int mega_groups(const MegaDims& d, MegaOp op) {
  switch (op) {
    case MegaOp::Qkv:
      return d.kv_heads;
    case MegaOp::AttnPartial:
      return d.batch * d.kv_heads;
    case MegaOp::Draw:
      return 0;
    default:
      return 1;
  }
}

// The group unit u publishes to.
LOOM_MEGA_HD int mega_group_of(const MegaDims& d, MegaOp op, int u) {
  switch (op) {
    case MegaOp::Qkv: {
      const int row = u * d.rows_per_tile;  // the tile's first row; it stays in that head
      if (row < d.q_dim()) return row / d.head_dim / d.group_size();
      if (row < d.q_dim() + d.kv_dim()) return (row - d.q_dim()) / d.head_dim;
      return (row - d.q_dim() - d.kv_dim()) / d.head_dim;
    }
    case MegaOp::AttnPartial:
      return u / d.attn_splits;
    default:
      return 0;
  }
}

// Units publishing to one group of op: the count a wait on that group expects per step.
LOOM_MEGA_HD uint32_t mega_group_units(const MegaDims& d, MegaOp op) {
  switch (op) {
    case MegaOp::Qkv:
      return uint32_t((d.group_size() + 2) * d.head_dim / d.rows_per_tile);
    case MegaOp::AttnPartial:
      return uint32_t(d.attn_splits);
    case MegaOp::Draw:
      return 0;
    default:
      return uint32_t(mega_units(d, op));
  }
}

// Counter layout: [Embed] [layer 0: Qkv × kv_heads, AttnPartial × batch · kv_heads,
// AttnReduce, OProj, GateUp, Down] … [layer L−1 …] [FinalNorm] [LmHead].
LOOM_MEGA_HD int mega_layer_counters(const MegaDims& d) {
  return d.kv_heads + d.batch * d.kv_heads + 4;
}
LOOM_MEGA_HD int mega_num_counters(const MegaDims& d) {
  return 1 + d.layers * mega_layer_counters(d) + 2;
}

// Index of counter (op, layer, group); layer is 0 for the once-per-step ops. Draw has none.
LOOM_MEGA_HD uint32_t mega_counter(const MegaDims& d, MegaOp op, int layer, int group) {
  const int base = 1 + layer * mega_layer_counters(d);
  const int kv = d.kv_heads;
  switch (op) {
    case MegaOp::Embed:
      return 0;
    case MegaOp::Qkv:
      return uint32_t(base + group);
    case MegaOp::AttnPartial:
      return uint32_t(base + kv + group);
    case MegaOp::AttnReduce:
      return uint32_t(base + kv + d.batch * kv);
    case MegaOp::OProj:
      return uint32_t(base + kv + d.batch * kv + 1);
    case MegaOp::GateUp:
      return uint32_t(base + kv + d.batch * kv + 2);
    case MegaOp::Down:
      return uint32_t(base + kv + d.batch * kv + 3);
    case MegaOp::FinalNorm:
      return uint32_t(1 + d.layers * mega_layer_counters(d));
    case MegaOp::LmHead:
      return uint32_t(2 + d.layers * mega_layer_counters(d));
    case MegaOp::Draw:
      return kMegaNoCounter;
  }
  return kMegaNoCounter;
}

// What unit u of (op, layer) adds 1 to after its stores (kMegaNoCounter: nothing).
LOOM_MEGA_HD uint32_t mega_publish(const MegaDims& d, MegaOp op, int layer, int u) {
  if (op == MegaOp::Draw) return kMegaNoCounter;
  return mega_counter(d, op, mega_per_layer(op) ? layer : 0, mega_group_of(d, op, u));
}

// Weight row of row r (0 ≤ r < R) of Qkv tile u: tile j = u mod (head_dim / R) of head
// h = u / (head_dim / R) holds the RoPE pairs (i, i + head_dim/2), i in [j·R/2, (j+1)·R/2):
// rows r < R/2 are the first halves, rows R/2 + r' their partners.
LOOM_MEGA_HD int mega_pair_row(int R, int head_dim, int u, int r) {
  const int tiles = head_dim / R, half = R / 2;
  const int i = (u % tiles) * half + (r < half ? r : r - half);
  return (u / tiles) * head_dim + (r < half ? i : i + head_dim / 2);
}
LOOM_MEGA_HD int mega_qkv_row(const MegaDims& d, int u, int r) {
  return mega_pair_row(d.rows_per_tile, d.head_dim, u, r);
}

// Weight row of row r of GateUp unit u (R a multiple of 16): each 16-row item t is 8 gate rows,
// columns u · R/2 + 8 t …, and their 8 up partners, so a tile holds its columns' gate and up
// dots and writes act itself (gemv_ops.cuh's gate_up_tile_out, gemv_mma.cuh's mma_item_pair);
// -1 past the weight.
LOOM_MEGA_HD int mega_gate_up_row(int R, int intermediate, int u, int r) {
  const int col = u * (R / 2) + (r >> 4) * 8 + (r & 7);
  return col >= intermediate ? -1 : (r & 8) ? intermediate + col : col;
}

// x / d for the GEMV loops' small runtime divisors (segments a row, items a unit), by one
// multiply-high, exact for x · d < 2^32 (m = ⌈2^32 / d⌉; d = 1: m = 0 and x added): a division by
// a runtime value is ~20 instructions, and these ran at every segment, 8% of a batch-8 step's
// instructions (ncu, bench/NOTES-cuda.md session 60).
struct FastDiv {
  uint32_t m, one;
  LOOM_MEGA_HD void set(uint32_t d) {
    m = d == 1 ? 0u : 0xFFFFFFFFu / d + 1u;
    one = d == 1;
  }
  LOOM_MEGA_HD uint32_t div(uint32_t x) const {
#ifdef __CUDA_ARCH__
    return __umulhi(x, m) + x * one;
#else
    return uint32_t((uint64_t(x) * m) >> 32) + x * one;
#endif
  }
};

// The tensor-core GEMVs' geometry (gemv_mma.cuh): a row's k columns in kMmaKParts parts (a
// row group's 8 warps), each streamed in segments of up to kMmaSegCols columns (8 rows × 512
// bytes, one ring slot), one box of the weight's tensor map a segment (megakernel.cuh).
constexpr int kMmaKParts = 8;
constexpr int kMmaSegCols = 256;

// Whether a GEMV input of k columns fits that geometry: each k part whole 64-column chunks (the
// 128-byte inner box of the tensor maps), so whole pairs of k-steps.
LOOM_MEGA_HD bool mega_mma_fits(int k) {
  return k > 0 && k % (kMmaKParts * 64) == 0;
}
// Whether a k part of k columns ends in a short segment (read through the weight's tail map,
// whose box is that segment's chunks).
LOOM_MEGA_HD bool mega_mma_tail(int k) {
  return k / kMmaKParts % kMmaSegCols != 0;
}
// The tensor maps in MegaTmaps: per layer qkv, o, gate_up and down, then lm_head, each followed
// by its tail map where mega_mma_tail(k). mega_tmap_index: a GEMV op's map (its tail the next).
LOOM_MEGA_HD int mega_tmaps_per_layer(const MegaDims& d) {
  return 4 + 2 * mega_mma_tail(d.hidden) + mega_mma_tail(d.q_dim()) + mega_mma_tail(d.intermediate);
}
LOOM_MEGA_HD int mega_tmap_index(const MegaDims& d, MegaOp op, int layer) {
  const int q = 1 + mega_mma_tail(d.hidden), o = 1 + mega_mma_tail(d.q_dim());
  const int base = (op == MegaOp::LmHead ? d.layers : layer) * mega_tmaps_per_layer(d);
  switch (op) {
    case MegaOp::OProj:
      return base + q;
    case MegaOp::GateUp:
      return base + q + o;
    case MegaOp::Down:
      return base + q + o + q;
    default:  // Qkv, LmHead
      return base;
  }
}
LOOM_MEGA_HD int mega_tmap_count(const MegaDims& d) {
  return d.layers * mega_tmaps_per_layer(d) + 1 + mega_mma_tail(d.hidden);
}

// The staged order of a GEMV input of M slots and k columns (what the GEMV keeps in shared
// memory, and what AttnReduce, FinalNorm and GateUp write for OProj, LmHead and Down to copy as
// it is). The A fragments' order (gemv_mma.cuh): the word (two bf16:
// columns c, c + 1, c even) of slot i is word w = 2 ((c / 16) mod 2) + (c / 8) mod 2 of the four
// that lane (i, t = (c mod 8) / 2) loads at once, 16 bytes per slot and 32 columns: columns
// 2t and 2t + 8 of k-steps 2p and 2p + 1, p = c / 32.
LOOM_MEGA_HD int mega_xs_word(int M, int i, int c) {
  return (((c >> 5) * M + i) * 4 + ((c & 7) >> 1)) * 4 + ((c >> 4) & 1) * 2 + ((c >> 3) & 1);
}
// Element (slot i, column c): mma, the A fragments' order; else [M, k] row-major.
LOOM_MEGA_HD size_t mega_xs_elem(bool mma, int M, int k, int i, int c) {
  return mma ? 2 * size_t(mega_xs_word(M, i, c)) + size_t(c & 1)
             : size_t(i) * size_t(k) + size_t(c);
}

// Byte offset of P[h, key] (bf16) in attention's fp32 score row h (attention_mma.cuh): the
// row's 16-byte granule u at u ^ (h mod 8), so the 8 rows of an ldmatrix (8 heads, rows 1 KB
// apart) meet 8 bank groups, and the softmax's lane writing P[h, i] after reading score i writes
// only bytes of scores its warp has read (test_mega_schedule checks both).
LOOM_MEGA_HD uint32_t mega_p_granule(int h, int key) {
  return uint32_t((((key >> 3) ^ (h & 7)) << 4) | ((key & 7) << 1));
}

// A wait: counter index and the count it reaches once per step (target e · count at step e).
struct MegaWait {
  uint32_t counter = kMegaNoCounter;
  uint32_t count = 0;
};

LOOM_MEGA_HD MegaWait mega_wait_on(const MegaDims& d, MegaOp producer, int layer, int group) {
  return MegaWait{mega_counter(d, producer, layer, group), mega_group_units(d, producer)};
}

// What unit u of (op, layer) waits for before it starts (the contracts above).
LOOM_MEGA_HD MegaWait mega_wait(const MegaDims& d, MegaOp op, int layer, int u) {
  switch (op) {
    case MegaOp::Embed:
      return MegaWait{};
    case MegaOp::Qkv:
      return layer == 0 ? mega_wait_on(d, MegaOp::Embed, 0, 0)
                        : mega_wait_on(d, MegaOp::Down, layer - 1, 0);
    case MegaOp::AttnPartial:
      return mega_wait_on(d, MegaOp::Qkv, layer, (u / d.attn_splits) % d.kv_heads);
    case MegaOp::AttnReduce:
      return mega_wait_on(d, MegaOp::AttnPartial, layer, u);
    case MegaOp::OProj:
      return mega_wait_on(d, MegaOp::AttnReduce, layer, 0);
    case MegaOp::GateUp:
      return mega_wait_on(d, MegaOp::OProj, layer, 0);
    case MegaOp::Down:
      return mega_wait_on(d, MegaOp::GateUp, layer, 0);
    case MegaOp::FinalNorm:
      return mega_wait_on(d, MegaOp::Down, d.layers - 1, 0);
    case MegaOp::LmHead:
      return mega_wait_on(d, MegaOp::FinalNorm, 0, 0);
    case MegaOp::Draw:
      return mega_wait_on(d, MegaOp::LmHead, 0, 0);
  }
  return MegaWait{};
}

// The value counter w.counter must reach at step `epoch` (1, 2, …), and the wrap-around test.
LOOM_MEGA_HD uint32_t mega_target(const MegaWait& w, uint32_t epoch) {
  return epoch * w.count;
}
LOOM_MEGA_HD bool mega_reached(uint32_t value, uint32_t target) {
  return int32_t(value - target) >= 0;
}

}  // namespace loom::mega
