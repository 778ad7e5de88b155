// CudaBackend's declaration, shared by its three source files:
//   cuda_backend.cpp  construction, cache, workspace, reporting
//   cuda_step.cpp     submit() / collect(): a step's inputs, graphs and draws
//   cuda_weights.cpp  load(): checkpoint tensors to the device through pinned staging
//   cuda_forward.cpp  the forward pass: the kernel sequence of one step
// Buffers live in device memory owned here; every pointer carries its shape.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/gemm.h"
#include "kernels/cuda_check.cuh"
#include "kernels/mega/megakernel.cuh"
#include "kernels/sampling.cuh"
#include "model/weights.h"

namespace loom::gpu {

// A role's device copy: its bytes in the weight arena, in the role's device dtype
// (model/roles.h: the compute dtype for matrices, fp32 for norms, biases and position tables);
// data null when the spec's features do not call for the role.
struct DeviceTensor {
  void* data = nullptr;
  DType dtype = DType::F32;
  const float* f32() const { return static_cast<const float*>(data); }  // fp32 roles
};

// Rows of the device embed / lm_head tables: vocab rounded up to 64 (zero rows after vocab).
inline int vocab_rows(int vocab) {
  return (vocab + 63) / 64 * 64;
}

// Decode graphs are captured per bucket of sequences; a larger decode step runs eagerly.
constexpr int kBucketSizes[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};
constexpr int kMaxGraphBatch = 256;

// Every weight on the device under the host Weights' field names (model/weights.h), e.g.
// layers[l].qkv: T [q_dim + 2 kv_dim, hidden]; embed and lm_head hold vocab_rows(vocab) rows,
// rows >= vocab zero; lm_head aliases embed when tied.
struct DeviceWeights : WeightSet<DeviceTensor> {
  size_t bytes = 0;           // all of the arena
  size_t streamed_bytes = 0;  // bytes read by a decode step (all but embed)
};

// Offsets (bytes) of a step's input arrays in one buffer, copied in one transfer. The layout
// is a function of the counts only, so a decode graph of bucket B always finds its inputs at
// the same place.
struct StepLayout {
  int n_slots = 0, n_seqs = 0, n_out = 0, n_tiles = 0, n_act = 0, bt_stride = 0;
  // Tiles 0 .. n_one_tiles - 1 hold one slot each (decoding sequences, short chunks:
  // CudaBackend::one_slot_tiles), the others up to a tile's slots of a longer chunk (prefill).
  int n_one_tiles = 0;
  // The slot count the fused-GEMV schedule is chosen on (CudaBackend::gemv_schedule): the slots
  // padded to the sequence bucket, in graph and eager steps alike, so that a step run eagerly
  // takes the kernels its graph takes (equal bits either way).
  int gemv_slots = 0;
  int action_dim = 0;
  // One slot a sequence, a tile a slot: a decode step, whose tile i is sequence i's one slot
  // (the layout builder makes it so; the fused decode attention relies on it).
  bool one_slot_a_sequence() const { return n_slots == n_seqs && n_tiles == n_slots; }
  size_t tokens = 0, positions = 0, cache_slot = 0, act_row = 0, act_slots = 0, actions = 0;
  size_t slot_start = 0, kv_len = 0, block_tables = 0, tiles = 0, out_rows = 0, params = 0;
  size_t bytes = 0;
  // A bf16 cache's one-slot tiles whose sequences share blocks (tiles_share_blocks: the TMA
  // decode's tma_shared_kv), filled in with the inputs; its steps have their own graphs.
  bool shared_kv = false;
  // Of those, steps whose shared prefixes are a third of the contexts or more
  // (tiles_group_prefix: the TMA decode's tma_group, group blocks); their own graphs too.
  bool group_kv = false;
  void compute();
};

class CudaBackend : public Backend {
 public:
  CudaBackend(ComputeDType dtype, int device, bool batch_invariant);
  ~CudaBackend() override;

  std::string name() const override { return "cuda"; }
  void load(const ModelSpec& spec, const Weights& weights) override;
  int allocate_cache(const CacheRequest& request) override;
  size_t kv_block_bytes(int block_size) const override;
  // 64: the decode tile (64 keys) is one TMA box of K and one of V instead of four each;
  // 256 x 22 FP8 Terra +2.0% under the H200's power cap (bench/results/2026-12-04-h200-s45-*).
  int default_block_size() const override { return 64; }
  void step(const StepBatch& batch, StepOutput& out) override;
  void submit(const StepBatch& batch) override;
  void collect(StepOutput& out) override;
  DeviceInfo device_info() override;
  double measure_copy_bandwidth_gbps() override;
  double measure_gemm_tflops() override;
  void set_profiling(bool on) override;
  std::vector<KernelTime> kernel_times() const override;
  void set_step_timing(bool on) override;
  StepTiming step_timing() const override { return timing_; }
  bool batch_invariant() const override { return invariant_; }
  void collect_kv_stats(const KvScales* saturation_scales) override;
  KvStats kv_stats() override;

  void load_random(const ModelSpec& spec, uint64_t seed);
  void fill_cache_random(uint64_t seed);
  double last_load_seconds() const { return load_seconds_; }
  double time_graph_replay(int n_seqs, int iters);
  void set_debug_skip(int mask) {
    free_graphs();
    debug_skip_ = mask;
  }
  // The decode-step megakernel (cuda_mega.cpp): which decode steps of 1-8 sequences take it.
  void set_megakernel_mode(MegakernelMode mode) {
    free_graphs();
    mega_mode_ = mode;
  }
  void set_megakernel(bool on) override {
    set_megakernel_mode(on ? MegakernelMode::Auto : MegakernelMode::Off);
  }
  int64_t megakernel_steps() const override { return mega_steps_; }
  int64_t chunk_graph_steps() const { return chunk_graph_steps_; }
  int64_t shared_kv_steps() const { return shared_kv_steps_; }
  int64_t group_kv_steps() const { return group_kv_steps_; }
  const std::string& megakernel_refusal() const { return mega_refusal_; }
  void set_megakernel_debug(const MegakernelDebug& debug) {
    free_graphs();
    mega_debug_ = debug;
    for (MegaBucket& m : mega_) m.built = false;  // rebuilt with the debug permutation/defect
    mega_trace_sum_ = MegakernelTrace{};
  }
  MegakernelTrace megakernel_trace() const;

 private:
  friend struct ForwardPass;
  void* dev_alloc(size_t bytes);  // tracked, freed in the destructor
  // Frees a dev_alloc allocation now (null: nothing) and nulls the pointer.
  template <class T>
  void dev_free(T*& p) {
    if (p == nullptr) return;
    allocs_.erase(std::find(allocs_.begin(), allocs_.end(), static_cast<void*>(p)));
    LOOM_CUDA_CHECK(cudaFree(p));
    p = nullptr;
  }
  void alloc_weight_arena(const ModelSpec& spec);
  void after_load();
  void ensure_workspace(int n_slots, int n_out);
  void free_graphs();
  void set_kv_format(const CacheRequest& request);
  int pick_splits(int n_tiles) const;
  bool one_slot_tiles(int n_new) const;  // a sequence's n_new slots as one-slot tiles
  void forward(const StepLayout& L, int num_splits, bool mega = false);
  // cuda_mega.cpp: whether this decode step (n_seqs sequences, bucket of batch B) takes the
  // megakernel; the bucket's schedule and sync block; the launch; a launch's trap check.
  bool mega_wanted(const StepBatch& b, int B) const;
  void ensure_mega(int B);
  std::vector<mega::MegaLayer> mega_layer_table() const;  // the weights (no caches)
  void run_mega(const StepLayout& L);
  void check_mega_trap(int buf, int B);
  void add_mega_trace(int B);  // (synchronises) the trace of the step just launched
  bool attention_mma() const;  // bf16 and a shape the tensor-core attention takes
  bool gemv_schedule(const StepLayout& L) const;  // fused GEMVs, not GEMMs (cuda_forward.cpp)
  bool lm_head_gemv(const StepLayout& L) const;   // the lm_head as the fused GEMV
  // forward() leaves the step's logits in logits_t_ (bf16) rather than logits_ (cuda_forward.cpp).
  bool logits_bf16(const StepLayout& L) const;
  // y = x·wᵀ through cuBLAS, or linear_fixed in batch-invariant mode (bf16).
  void linear(const void* x, const void* w, DType y_t, void* y, int m, int n, int k, int ldy = 0);
  cudaEvent_t pooled_event();  // from event_pool_ (or new); give it back to the pool
  void prof_begin(const char* family);
  void prof_end();
  void prof_collect(const char* phase);
  // forward() captured into an instantiated graph (cuda_step.cpp).
  cudaGraphExec_t capture_forward(const StepLayout& L, int splits, bool mega);
  void time_graph_split(const StepLayout& L, int splits);  // --profile (cuda_step.cpp)

  ComputeDType cdtype_;
  DType t_;  // activation / weight-matrix dtype on the device (F32 or BF16)
  // --batch-invariant: the GEMM schedule at every batch size, every linear layer through
  // linear_fixed (fixed reduction order), lm_head straight to fp32 logits.
  bool invariant_ = false;
  int device_ = 0;
  int num_sms_ = 0;
  std::string device_name_;
  size_t device_memory_ = 0;
  cudaStream_t stream_ = nullptr;
  Gemm gemm_;

  ModelSpec spec_;
  bool loaded_ = false;
  DeviceWeights w_;
  float* inv_freq_ = nullptr;   // [head_dim / 2]; zeros when rotary is off (see after_load)
  float* norm_ones_ = nullptr;  // [hidden] ones: the RMSNorm scale when norm_affine is false
  double load_seconds_ = 0;

  // KV pool: kv_t_ [layers, 2, num_blocks + 1, block_size, kv_heads, head_dim]; the extra
  // block takes the writes of padded decode slots. kv_t_ is t_ or F8E4M3 (--kv-dtype fp8),
  // whose scales kv_scale_ holds: [layers, 2, kv_heads] (K then V per layer), fixed before
  // any graph is captured.
  void* kv_ = nullptr;
  DType kv_t_ = DType::F32;
  float* kv_scale_ = nullptr;
  int num_blocks_ = 0, block_size_ = 16;
  size_t kv_bytes_ = 0;
  int max_bt_ = 0;  // block-table width of graph steps: ceil(max_positions / block_size)

  // Activation workspace, sized for cap_slots_ slots and cap_out_ logits rows.
  int cap_slots_ = 0, cap_out_ = 0;
  float* x_ = nullptr;         // [cap_slots, hidden] fp32 residual stream
  void* h_ = nullptr;          // T [cap_slots, hidden] normalised
  void* qkv_ = nullptr;        // T [cap_slots, q_dim + 2 kv_dim]
  void* attn_ = nullptr;       // T [cap_slots, q_dim]
  void* gu_ = nullptr;         // T [cap_slots, 2 intermediate]
  void* act_ = nullptr;        // T [cap_slots, intermediate]
  void* delta_ = nullptr;      // T [cap_slots, hidden] block output before the residual add
  void* act_a_ = nullptr;      // T [cap_slots, hidden] action MLP ping
  void* act_b_ = nullptr;      // T [cap_slots, hidden] action MLP pong
  void* h_last_ = nullptr;     // T [cap_out, hidden]
  float* logits_ = nullptr;    // [cap_out, logits_ld_]
  void* logits_t_ = nullptr;   // bf16 [cap_out, logits_ld_]: cuBLAS lm_head output (bf16 only)
  int logits_ld_ = 0;          // vocab rounded up to 64: aligned rows for cuBLAS and sampler
  int32_t* tokens_ = nullptr;  // [cap_out] the last step's draws (kept when the workspace grows)
  void* sample_ws_ = nullptr;  // sample_workspace_bytes(cap_out)
  float* part_o_ = nullptr;    // attention partials: [kMaxPartBlocks, kAttnRows, head_dim]
  float* part_ml_ = nullptr;   // [kMaxPartBlocks, kAttnRows, 2]
  // Tensor-core decode partitions (bf16): [kMaxGraphBatch, kv_heads, max_parts(max_bt_), G,
  // head_dim + 2], allocated with the cache (its size follows max_bt_); null otherwise.
  float* part_mma_ = nullptr;
  size_t part_mma_floats_ = 0;
  int* mma_counters_ = nullptr;  // [kMaxGraphBatch, kv_heads] zeros (in-kernel combine)
  size_t mma_counters_len_ = 0;
  std::vector<void*> workspace_allocs_;

  // Step inputs: two pinned host buffers (a step is staged while the one before runs) and
  // one device copy, cap_in_ bytes each; in_copied_[i]: buffer i's last upload has left.
  size_t cap_in_ = 0;
  std::array<char*, 2> in_host_{};
  char* in_dev_ = nullptr;
  std::array<cudaEvent_t, 2> in_copied_{};
  // A submitted step until collect(): its buffers (index buf of the pairs here), the event
  // after its downloads, and what collect() needs to give its output.
  struct InFlight {
    int buf = 0;
    int n_seqs = 0;
    std::vector<int> out_seq;   // [n_out rows drawn or kept] out row → sequence
    std::vector<float> logits;  // [n_seqs, vocab] when want_logits
    bool timed = false;         // set_step_timing: a decode-graph step between timing_ev_[buf]
    double host_s = 0;          // submit()'s wall time
    int mega_batch = 0;         // the megakernel's bucket when it ran the step, else 0
  };
  std::deque<InFlight> in_flight_;  // oldest first, at most two
  int next_buf_ = 0;
  std::array<int32_t*, 2> tokens_host_{};  // pinned [cap_out] draws of the step using buffer i
  std::array<cudaEvent_t, 2> step_done_{};
  std::vector<int> prev_row_;  // [n_seqs of the last submitted step] its out row if it drew

  // Decode graphs per bucket (1, 2, 4, …, 256), then per bucket of StepLayout::shared_kv
  // steps, then of group_kv steps, captured on first use; the last one a bucket replayed (one
  // of these or the megakernel's), which time_graph_replay times.
  static constexpr int kBuckets = 9;
  std::array<cudaGraphExec_t, 3 * kBuckets> graphs_{};
  std::array<cudaGraphExec_t, kBuckets> last_graph_{};
  // Graphs of steps whose short chunks run as one-slot tiles beside decoding sequences (a
  // frame's action chunk), keyed by (bucket, slots beyond one a sequence, action slots,
  // shared_kv + group_kv); at most kMaxChunkGraphs, further shapes run eagerly.
  static constexpr size_t kMaxChunkGraphs = 32;
  std::map<std::array<int, 4>, cudaGraphExec_t> chunk_graphs_;

  // The megakernel per batch bucket 1, 2, 4, 8 (index log2 B): the schedule on the device, its
  // sync block (zeroed when allocated and after a trapped launch, never per step) and graph.
  struct MegaBucket {
    bool built = false;
    mega::MegaDims dims;
    int num_ctas = 0;
    mega::MegaInstruction* instrs = nullptr;  // all programs back to back
    int32_t* prog_begin = nullptr;            // [num_ctas + 1]
    int32_t* cta_program = nullptr;           // [num_ctas] (debug permutation) or null
    mega::MegaSyncHeader* sync = nullptr;
    size_t sync_bytes = 0;
    std::vector<int32_t> prog_begin_host;  // [num_ctas + 1]
    cudaGraphExec_t graph = nullptr;
  };
  static constexpr int kMegaBuckets = 4;
  std::array<MegaBucket, kMegaBuckets> mega_{};
  MegakernelMode mega_mode_ = MegakernelMode::Off;  // until it beats the graph path
  MegakernelDebug mega_debug_;
  std::string mega_refusal_;  // why the model cannot take the megakernel ("" when it can)
  mega::MegaLayer* mega_layers_ = nullptr;       // [layers] device table, rebuilt with the cache
  std::unique_ptr<mega::MegaTmaps> mega_tmaps_;  // the tensor-core GEMVs' weight maps (a launch
                                                 // parameter), encoded at their first bucket
  const void* mega_layers_kv_ = nullptr;         // the pool mega_layers_ points into
  float* mega_attn_part_ = nullptr;              // [8, kv_heads, mega_max_parts_, G, head_dim + 2]
  int mega_max_parts_ = 0;
  mega::MegaDrawPartial* mega_draw_part_ = nullptr;          // [lm_head tiles, 8]
  std::array<mega::MegaSyncHeader*, 2> mega_header_host_{};  // pinned, per input buffer
  int64_t mega_steps_ = 0;
  int64_t chunk_graph_steps_ = 0;               // steps that ran a chunk_graphs_ entry
  int64_t shared_kv_steps_ = 0;                 // steps with StepLayout::shared_kv
  int64_t group_kv_steps_ = 0;                  // steps with StepLayout::group_kv
  int mega_smem_optin_ = 0;                     // shared memory a block may opt in to
  mega::MegaTraceEntry* mega_trace_ = nullptr;  // [num_sms, mega_trace_stride_] (debug trace)
  int mega_trace_stride_ = 0;
  MegakernelTrace mega_trace_sum_;  // sums over the traced steps (megakernel_trace: means)

  // Profiling: (family, start, end) events of the current eager step, totals per family.
  bool profiling_ = false;
  int debug_skip_ = 0;  // cuda_set_debug_skip
  // loom calibrate (collect_kv_stats): [layers, 2, kv_heads] maxima, the saturation scales in
  // the same layout (null: none), [2] counts; steps run eagerly while on.
  float* stats_absmax_ = nullptr;
  float* stats_scales_ = nullptr;
  unsigned long long* stats_counts_ = nullptr;
  bool stats_on_ = false, stats_count_sat_ = false;
  std::vector<std::pair<const char*, std::array<cudaEvent_t, 2>>> prof_open_;
  std::vector<cudaEvent_t> event_pool_;
  std::map<std::string, KernelTime> prof_totals_;  // by phase + '/' + family
  std::map<std::string, int64_t> prof_steps_;      // by phase
  int64_t prof_decode_steps_ = 0;                  // decode steps profiled (time_graph_split)
  // set_step_timing: an event pair around each decode-graph step's device work, per buffer.
  bool timing_on_ = false;
  std::array<std::array<cudaEvent_t, 2>, 2> timing_ev_{};
  StepTiming timing_;

  std::vector<void*> allocs_;  // weights, cache, inputs
  size_t peak_bytes_ = 0;
};

}  // namespace loom::gpu
