// The one interface between the engine and the hardware (design §6). A StepBatch is flat like
// vLLM's: the new slots of every scheduled sequence back to back, each with its position and
// either a token id or an action row, plus per sequence its block table, cached length and
// sampling parameters. Prefill chunks, 7-slot frame chunks and decode steps are the same call.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/kv_format.h"
#include "core/sampling_params.h"
#include "model/spec.h"
#include "model/weights.h"

namespace loom {

constexpr int32_t kActionSlot = -1;  // StepBatch::tokens value of a slot fed an action row

// StepBatch::tokens value of a slot fed the token that the previously submitted step draws for
// its sequence k (Backend::submit): the host stages a step before the one before it has ended.
constexpr int32_t future_token(int k) {
  return -2 - k;
}
constexpr int future_index(int32_t token) {  // k of a future_token(k); < 0 for other values
  return -2 - token;
}

struct StepBatch {
  // Per slot, sequences back to back.
  std::vector<int32_t> tokens;     // [n_slots] token id, kActionSlot or future_token(k)
  std::vector<int32_t> positions;  // [n_slots] flat position p in the round (RoPE, pos tables)
  std::vector<float> actions;      // [n_slots, action_dim] action rows; zeros in token slots

  // Per sequence.
  std::vector<int32_t> slot_start;  // [n_seqs + 1] offsets into the per-slot arrays
  std::vector<int32_t> kv_len;      // [n_seqs] slots already cached; new slot j goes to kv_len + j
  std::vector<int32_t> block_tables;  // [n_seqs, blocks_per_seq] physical block ids, -1 padded
  int blocks_per_seq = 0;
  std::vector<uint8_t> sample;           // [n_seqs] 1: draw a token from the last slot's logits
  std::vector<SamplingParams> sampling;  // [n_seqs]
  std::vector<uint32_t> sample_index;    // [n_seqs] which of the job's num_samples
  std::vector<uint64_t> draw_index;      // [n_seqs] tokens this sequence has generated so far
  bool want_logits = false;              // fill StepOutput::logits (tests and goldens)

  int n_seqs() const { return int(kv_len.size()); }
  int n_slots() const { return int(tokens.size()); }
  void clear();
};

struct StepOutput {
  std::vector<int32_t> tokens;  // [n_seqs] sampled id, -1 where sample == 0
  std::vector<float> logits;    // [n_seqs, vocab] last-slot logits, only when want_logits
};

struct CacheRequest {
  int block_size = 16;               // slots per KV block
  int num_blocks = 0;                // 0: as many as the memory budget allows
  double gpu_memory_fraction = 0.9;  // CUDA: share of device memory loom may use in all
  double host_cache_gib = 2.0;       // CPU: KV pool size
  KvDType kv_dtype = KvDType::Auto;  // element type of the pool (core/kv_format.h)
  KvScales kv_scales;                // FP8: per (layer, kv head); empty: 1.0 everywhere
  // The largest step the scheduler may form (0: not known). CUDA: its activations are
  // allocated before the pool takes the memory left (as vLLM profiles a step of
  // max_num_batched_tokens before sizing its cache), not grown into the reserve mid-run.
  int step_slots = 0;
  int step_seqs = 0;
};

struct KernelTime {
  std::string name;   // kernel family, e.g. "paged_attention", "gemm_qkv"
  std::string phase;  // the steps it ran in: "decode" (every sequence one new slot),
                      // "prefill" (none with one) or "mixed"
  double ms = 0;      // total over `calls`
  int64_t calls = 0;
  int64_t steps = 0;  // steps of that phase profiled
};

// Where a decode step's time goes (loom bench): the steps that replayed a decode graph, the
// device's time from the inputs' upload to the tokens' download (events), and the host's time
// staging and launching them (Backend::submit; hidden behind the previous step's device work
// when the engine pipelines steps).
struct StepTiming {
  int64_t steps = 0;
  double gpu_s = 0;   // device time of those steps
  double host_s = 0;  // Backend::submit's wall time for them
  // Step graphs captured and instantiated meanwhile (a bucket's first step), and the host's wall
  // time for it (partly behind the device running that step eagerly).
  int64_t captures = 0;
  double capture_s = 0;
};

struct DeviceInfo {
  std::string name;         // "NVIDIA H200", "cpu"
  size_t memory_bytes = 0;  // device memory in all
  size_t weight_bytes = 0;  // weights resident
  size_t kv_bytes = 0;      // KV pool
  size_t peak_bytes = 0;    // peak device memory in use by loom
  double copy_gbps = 0;     // measured device-to-device copy bandwidth (read + write), 0 if unknown
  std::string kv_dtype;     // element type of the KV pool: "f32", "bf16" or "fp8"
  std::string driver = "n/a";        // CUDA version the driver supports ("13.0"); n/a on the cpu
  std::string cuda_runtime = "n/a";  // CUDA runtime loom was linked with ("13.0")
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Takes the model; afterwards the caller may drop its Weights.
  virtual void load(const ModelSpec& spec, const Weights& weights) = 0;
  // Allocates the paged KV pool; returns the number of blocks it holds.
  virtual int allocate_cache(const CacheRequest& request) = 0;
  // Bytes of one block over all layers, K and V.
  virtual size_t kv_block_bytes(int block_size) const = 0;
  // The block size the CLI uses when --block-size is not given: the one this backend's
  // attention reads best (any block size gives the same tokens).
  virtual int default_block_size() const { return 16; }
  // One forward over the batch and the draws it asks for.
  virtual void step(const StepBatch& batch, StepOutput& out) = 0;

  // Pipelined steps (the engine's overlap of host and device): submit() stages a step and
  // starts it without waiting; collect() waits for the oldest submitted step and gives its
  // output. A batch may name future_token(k) only for a sequence k that the step submitted just
  // before it draws from; at most two steps are submitted and not collected. The defaults run
  // step() inside submit(), resolving futures from the previous output (the cpu backend, test
  // backends); a device backend overrides both and resolves futures on the device.
  virtual void submit(const StepBatch& batch);
  virtual void collect(StepOutput& out);

  // Reporting (loom bench, run reports). Defaults suit a backend with nothing to say.
  virtual DeviceInfo device_info() { return DeviceInfo{}; }
  virtual double measure_copy_bandwidth_gbps() { return 0; }  // runs a timed copy
  virtual double measure_gemm_tflops() { return 0; }          // runs a timed bf16 GEMM
  virtual void set_profiling(bool on) { (void)on; }           // per-kernel timing (slower)
  virtual std::vector<KernelTime> kernel_times() const { return {}; }
  virtual void set_step_timing(bool on) { (void)on; }  // decode steps' device time (cheap)
  // The decode-step megakernel (cuda, issue 15): decode steps of 1-8 sequences as one
  // persistent launch where the model and the draws allow (off by default), else the graph of
  // kernels; and how many steps took it. Backends without one ignore the switch.
  virtual void set_megakernel(bool on) { (void)on; }
  virtual int64_t megakernel_steps() const { return 0; }
  virtual StepTiming step_timing() const { return {}; }
  // True when a sequence's logits do not depend on the rest of the batch (README "Batch
  // invariance"): always on the cpu backend, on cuda with --batch-invariant.
  virtual bool batch_invariant() const { return false; }

  // loom calibrate: from now on collect KvStats over the K and V values the steps write (before
  // any KV rounding); with scales, also count what an FP8 cache with them would saturate.
  // The default throws: the backend has no such collection.
  virtual void collect_kv_stats(const KvScales* saturation_scales);
  virtual KvStats kv_stats();

 private:
  std::vector<StepOutput> submitted_;  // the default submit()'s outputs not yet collected
  std::vector<int32_t> last_draws_;    // [n_seqs] of the last submitted step: its tokens
};

enum class BackendKind { Cpu, Cuda };
enum class ComputeDType { F32, BF16 };

// True when the CUDA backend was built and a device is present; otherwise says why.
bool cuda_available(std::string* why);

// Makes a backend; throws loom::Error when CUDA was asked for and is not built or not present.
// batch_invariant: every kernel's per-row arithmetic independent of the batch (cuda: bf16
// only, fixed-order linear layers; cpu: always so, the flag is accepted and changes nothing).
std::unique_ptr<Backend> make_backend(BackendKind kind, ComputeDType dtype, int device,
                                      bool batch_invariant = false);

}  // namespace loom
