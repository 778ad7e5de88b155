// The megakernel's synchronisation (contracts: instructions.h, "Counters and epochs" and
// "Memory ordering"). Every wait and publish is a CTA-wide call.
//   wait     thread 0 spins on ld.acquire.gpu (back to back, a sleep every 16th poll) until the
//            counter reaches epoch · count (wrap-around compare), then a CTA barrier. It gives up
//            after MegaArgs::timeout_ns, or as soon as another CTA gave up: the first to time out
//            records the counter and its value in MegaSyncHeader::trap_*; every CTA then
//            leaves the step, so a deadlock fails the launch's check on the host instead of
//            hanging it (and leaves no sticky CUDA error behind).
//   publish  a CTA barrier (every thread's stores of the unit are before it), then thread 1
//            adds 1 with red.release.gpu — the pattern of CUTLASS's GenericBarrier; where the
//            completing unit goes on with the consumer's work (a ticket), the add is acq_rel.
#pragma once

#include <cstdint>

#include "kernels/common.cuh"
#include "kernels/mega/megakernel.cuh"

namespace loom::mega {

using gpu::global_ns;
using gpu::ld_acquire_gpu;

__device__ __forceinline__ uint32_t ld_relaxed_gpu(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void red_release_gpu(uint32_t* p, uint32_t v) {
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ void st_release_gpu(uint32_t* p, uint32_t v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// The debug jitter: a pseudo-random 0–4 µs sleep keyed by (seed, CTA, site, a, b).
__device__ __forceinline__ void jitter(uint32_t seed, uint32_t site, uint32_t a, uint32_t b) {
  if (seed == 0) return;
  uint32_t h = seed ^ (blockIdx.x * 0x9E3779B9u) ^ (site * 0x7FEB352Du) ^ (a * 0x846CA68Bu) ^
               (b * 0x2C1B3C6Du);
  h ^= h >> 16;
  h *= 0x85EBCA6Bu;
  h ^= h >> 13;
  h *= 0xC2B2AE35u;
  h ^= h >> 16;
  __nanosleep(h & 4095u);
}

// The per-launch context every instruction gets.
struct MegaCtx {
  uint32_t* counters;
  MegaSyncHeader* sync;
  uint32_t epoch;  // this launch's step: 1, 2, … since the block was zeroed
  uint64_t timeout_ns;
  uint32_t jitter_seed;
  bool trace;               // MegaArgs::trace set: thread 0 sums its spin time in waited
  bool skip_waits;          // MegaArgs::skip_waits (benchmarks only)
  mutable uint64_t waited;  // (thread 0) ns spent in waits since the instruction started
  mutable uint64_t staged;  // (thread 0) when a GEMV's input was staged
};

constexpr uint32_t kMegaQuickPolls = 16;  // cta_wait's polls between two trap checks

// Waits until counter w reached its target of this epoch. false: the step was abandoned
// (this CTA timed out, or another did); the caller returns from the kernel.
__device__ __forceinline__ bool cta_wait(const MegaCtx& c, MegaWait w) {
  int ok = 1;
  if (threadIdx.x == 0 && w.counter != kMegaNoCounter && !c.skip_waits) {
    jitter(c.jitter_seed, 1, w.counter, c.epoch);
    const uint32_t target = mega_target(w, c.epoch);
    const uint32_t* p = c.counters + w.counter;
    uint32_t v = ld_acquire_gpu(p);
    if (!mega_reached(v, target)) {
      const uint64_t t0 = global_ns(), deadline = t0 + c.timeout_ns;
      // A poll is an L2 round trip (~1 µs while the weights stream), and the wait ends a round
      // trip plus on average half a poll's period after the counter reached its target: so the
      // polls run back to back, and only every kMegaQuickPolls-th checks the trap word and the
      // deadline (a load and a clock read of their own) and sleeps.
      for (uint32_t polls = 1; !mega_reached(v = ld_acquire_gpu(p), target); polls++) {
        if (polls % kMegaQuickPolls != 0) continue;
        if (ld_relaxed_gpu(&c.sync->trap_counter) != 0) {
          ok = 0;
          break;
        }
        if (global_ns() > deadline) {
          if (atomicCAS(&c.sync->trap_counter, 0u, w.counter + 1) == 0u)
            atomicExch(&c.sync->trap_value, v);
          ok = 0;
          break;
        }
        __nanosleep(256);
      }
      if (c.trace) c.waited += global_ns() - t0;
    }
  }
  return __syncthreads_and(ok) != 0;
}

// Adds `units` (the units of the counter's group this CTA completes with the one add) to
// `counter` once every thread's stores of those units are done (kMegaNoCounter: the barrier).
__device__ __forceinline__ void cta_publish(const MegaCtx& c, uint32_t counter,
                                            uint32_t units = 1) {
  __syncthreads();
  // Thread 1: it issues no weight copies (lane 0 of each warp does), so its release has no
  // loads of its own in flight to wait for.
  if (threadIdx.x == 1 && counter != kMegaNoCounter) {
    jitter(c.jitter_seed, 2, counter, c.epoch);
    red_release_gpu(c.counters + counter, units);
  }
}

// cta_publish of `units` that also says whether they completed their group this step (the add
// took the counter to epoch · count): thread 1's add is acq_rel, so the CTA that completes a
// group sees every other unit's stores (after the barrier, through L2) and may consume them at
// once. `flag` is shared memory.
__device__ __forceinline__ bool cta_publish_last(const MegaCtx& c, uint32_t counter, uint32_t count,
                                                 int* flag, uint32_t units = 1) {
  __syncthreads();
  if (threadIdx.x == 1) {
    jitter(c.jitter_seed, 5, counter, c.epoch);
    uint32_t old;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;"
                 : "=r"(old)
                 : "l"(c.counters + counter), "r"(units)
                 : "memory");
    *flag = old + units == c.epoch * count;
  }
  __syncthreads();
  return *flag != 0;
}

}  // namespace loom::mega
