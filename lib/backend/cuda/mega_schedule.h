// The host side of the decode-step megakernel (kernels/mega/instructions.h): building the
// per-SM instruction lists of one (model, batch bucket, SM count), and checking a list. Plain
// C++, compiled into the CPU library too, so the schedule and its checker are tested without
// a GPU. The lists are built once per model and batch bucket and replayed (a CUDA graph): they
// do not depend on the context length, which attention reads on the device.
//
// Distribution. Ops are laid out in the order of the forward pass; each op instance's units
// are cut into one contiguous range per SM (⌊n / num_sms⌋ units each, and the n mod num_sms
// extra units to the SMs that have streamed the fewest bytes so far), so every SM's list is in
// forward order — which is a global order consistent with every wait, hence no deadlock — and
// the phases that wait on whole ops (o_proj, gate_up, down, lm_head) end together.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "kernels/mega/instructions.h"
#include "model/spec.h"

namespace loom::mega {

struct MegaOptions {
  int rows_per_tile = 16;        // Qkv / OProj / GateUp / Down tile rows; divides head_dim
  int lm_rows_per_tile = 64;     // LmHead tile rows
  int embed_cols = 256;          // Embed tile columns
  int attn_splits = 0;           // AttnPartial units per (slot, KV head); 0: fill the SMs
  DType weight_t = DType::BF16;  // BF16 (production) or F32 (the exact CPU comparison)
  // The step's slots include action slots (frame models): Embed projects them (Linear
  // projection only; an MLP projection's hidden × hidden layers stay on the graph path).
  bool action_slots = false;
};

struct MegaSchedule {
  MegaDims dims;
  int num_sms = 0;
  std::vector<std::vector<MegaInstruction>> programs;  // [num_sms] each SM's list, in order
  std::vector<uint32_t> expected;  // [num_counters()] units publishing to each counter a step
  std::vector<double> sm_bytes;    // [num_sms] bytes each SM streams a step (nominal)

  int num_counters() const { return mega_num_counters(dims); }
  // Bytes of the device sync block: the header, then the counters.
  size_t sync_bytes() const { return sizeof(MegaSyncHeader) + 4 * size_t(num_counters()); }
};

// Throws loom::Error naming what the megakernel cannot run (norm kind, biases, MLP kind,
// head_dim, batch, …) or which option is out of range.
MegaSchedule build_mega_schedule(const ModelSpec& spec, int batch, int num_sms,
                                 const MegaOptions& options = {});

// "" when the schedule is sound, else the first defect found, checked in this order:
//   1. every instruction names a known op, a layer in range and a non-empty unit range;
//      the counter layout maps every (op, layer, group) to its own index;
//   2. every unit of every op instance is covered exactly once;
//   3. every counter's expected count equals the number of units publishing to it, and every
//      wait asks for that count;
//   4. every read of a buffer happens after its writer and every overwrite after the readers
//      of the previous contents, by the waits alone (mega_hazard_error);
//   5. some global order is consistent with every SM's program order and every wait
//      (mega_order_error, Kahn's algorithm);
//   6. the persistent execution runs two steps to completion (mega_simulation_error).
// `wait` is the contract under test: mega_wait, or a deliberately broken one in the tests.
using MegaWaitFn = MegaWait (*)(const MegaDims&, MegaOp, int layer, int unit);
std::string check_mega_schedule(const MegaSchedule& s, MegaWaitFn wait = mega_wait);

// "qkv layer 3 group 1" for counter index c ("index c, out of range" past the layout).
std::string mega_counter_name(const MegaDims& d, uint32_t c);

std::string mega_hazard_error(const MegaSchedule& s, MegaWaitFn wait = mega_wait);
std::string mega_order_error(const MegaSchedule& s, MegaWaitFn wait = mega_wait);

struct MegaSimulation {
  int64_t units_run = 0;           // units executed over all steps
  int passes = 0;                  // sweeps over the SMs until no CTA could move (all steps)
  std::vector<uint32_t> counters;  // the counters after the last step
};
// Runs `steps` launches of the persistent kernel on the host: each SM's CTA runs its list in
// order, a unit starting only when its counter reached its target (mega_reached, so with the
// device's wrap-around arithmetic). The counters start as after `first_step` completed steps.
// "" when every step completes with every counter at exactly (first_step + steps) · expected.
std::string mega_simulation_error(const MegaSchedule& s, int steps = 2, uint32_t first_step = 0,
                                  MegaSimulation* out = nullptr, MegaWaitFn wait = mega_wait);

}  // namespace loom::mega
