// CudaBackend's steps: a StepBatch checked, laid out in one pinned buffer (StepLayout), copied
// up in one transfer, run (a decode bucket's graph, or the forward pass eagerly), its draws
// copied down. submit() returns once the step is queued on the stream; collect() waits for it.
//
// Pipelining (Backend::submit): while step N runs, the host stages step N + 1 into the other
// of two pinned input buffers and queues it behind N. Slots of N + 1 that take a token N draws
// (future_token) are filled on the device from N's draws (resolve_future_tokens) after the
// upload: the stream orders N's sampling, the upload and the fill. Each step's draws land in
// their own pinned buffer, so collecting N never races N + 1's download.
#include <algorithm>
#include <chrono>
#include <cstring>

#include "backend/cuda/cuda_backend_impl.h"
#include "kernels/activation.cuh"
#include "kernels/attention.h"
#include "kernels/cuda_check.cuh"
#include "kernels/embed.cuh"

namespace loom::gpu {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// prev_row: [sequences of the previously submitted step] its out row where it drew, else -1.
void check_batch(const StepBatch& b, const ModelSpec& spec, int num_blocks, int block_size,
                 const std::vector<int>& prev_row) {
  const int n_seqs = b.n_seqs(), n_slots = b.n_slots();
  LOOM_CHECK(n_seqs > 0, "step: batch has no sequences");
  LOOM_CHECK(int(b.positions.size()) == n_slots, "step: ", b.positions.size(), " positions for ",
             n_slots, " slots");
  LOOM_CHECK(int(b.slot_start.size()) == n_seqs + 1 && b.slot_start[0] == 0 &&
                 b.slot_start[size_t(n_seqs)] == n_slots,
             "step: slot_start must have n_seqs + 1 = ", n_seqs + 1, " entries from 0 to ",
             n_slots);
  LOOM_CHECK(b.blocks_per_seq > 0 && b.block_tables.size() == size_t(n_seqs) * b.blocks_per_seq,
             "step: block_tables has ", b.block_tables.size(), " entries, expected ", n_seqs, " x ",
             b.blocks_per_seq);
  LOOM_CHECK(b.sample.size() == size_t(n_seqs) && b.sampling.size() == size_t(n_seqs) &&
                 b.sample_index.size() == size_t(n_seqs) && b.draw_index.size() == size_t(n_seqs),
             "step: per-sequence sampling arrays must have ", n_seqs, " entries");
  bool any_action = false;
  for (int i = 0; i < n_slots; i++) {
    const int tok = b.tokens[size_t(i)], k = future_index(tok);
    if (k >= 0)
      LOOM_CHECK(size_t(k) < prev_row.size() && prev_row[size_t(k)] >= 0, "step: slot ", i,
                 " takes the draw of sequence ", k, " of the previous step, which drew none");
    else
      LOOM_CHECK(tok == kActionSlot || (tok >= 0 && tok < spec.vocab), "step: slot ", i, " token ",
                 tok, " outside [0, ", spec.vocab, ")");
    any_action |= tok == kActionSlot;
    const int p = b.positions[size_t(i)];
    LOOM_CHECK(p >= 0, "step: slot ", i, " position ", p);
    if (spec.positions == PositionKind::Absolute)
      LOOM_CHECK(p < spec.max_positions, "step: slot ", i, " position ", p,
                 " beyond the learned position table of ", spec.max_positions, " positions");
    if (spec.has_frames())
      LOOM_CHECK(p / spec.frame_slots() < spec.temporal_rows, "step: slot ", i, " position ", p,
                 " past the temporal table (", spec.temporal_rows, " frames of ",
                 spec.frame_slots(), ")");
  }
  if (any_action) {
    LOOM_CHECK(spec.action_projection != ActionProjection::None,
               "step: action slot in a model without an action projection");
    LOOM_CHECK(b.actions.size() == size_t(n_slots) * spec.action_dim, "step: ", b.actions.size(),
               " action values, expected ", n_slots, " x ", spec.action_dim);
  }
  for (int s = 0; s < n_seqs; s++) {
    const int n_new = b.slot_start[size_t(s) + 1] - b.slot_start[size_t(s)];
    LOOM_CHECK(n_new >= 1, "step: sequence ", s, " has ", n_new, " new slots");
    const int total = b.kv_len[size_t(s)] + n_new;
    LOOM_CHECK(b.kv_len[size_t(s)] >= 0 && total <= b.blocks_per_seq * block_size,
               "step: sequence ", s, " needs ", total, " cache slots, its table holds ",
               b.blocks_per_seq * block_size);
    for (int j = 0; j < (total + block_size - 1) / block_size; j++) {
      const int blk = b.block_tables[size_t(s) * b.blocks_per_seq + j];
      LOOM_CHECK(blk >= 0 && blk < num_blocks, "step: sequence ", s, " block table entry ", j,
                 " = ", blk, " outside [0, ", num_blocks, ")");
    }
  }
}

}  // namespace

void CudaBackend::step(const StepBatch& b, StepOutput& out) {
  LOOM_CHECK(in_flight_.empty(), "CUDA backend: step() while submitted steps are uncollected");
  submit(b);
  collect(out);
}

void CudaBackend::submit(const StepBatch& b) {
  const auto t_enter = std::chrono::steady_clock::now();
  LOOM_CHECK(loaded_, "CUDA backend: step before load");
  LOOM_CHECK(kv_ != nullptr, "CUDA backend: step before allocate_cache");
  LOOM_CHECK(in_flight_.size() < 2, "CUDA backend: a third step submitted before a collect");
  check_batch(b, spec_, num_blocks_, block_size_, prev_row_);
  const int n_seqs = b.n_seqs(), n_slots = b.n_slots();
  const int bs = block_size_;

  // A graph step: every sequence's new slots run as one-slot tiles (decoding sequences, short
  // chunks), so the layout depends only on the sequence bucket, the slots beyond one a sequence
  // and the action slots, and the step replays that shape's graph. A decode step is one with
  // one slot a sequence and no action slot.
  int n_act = 0;
  for (int i = 0; i < n_slots; i++) n_act += b.tokens[size_t(i)] == kActionSlot;
  bool graph_step =
      !profiling_ && !stats_on_ && n_seqs <= kMaxGraphBatch && b.blocks_per_seq <= max_bt_;
  for (int s = 0; graph_step && s < n_seqs; s++)
    graph_step = one_slot_tiles(b.slot_start[size_t(s) + 1] - b.slot_start[size_t(s)]);
  const bool decode = graph_step && n_slots == n_seqs && n_act == 0;
  // The sequence bucket a graph step pads to; eager steps read it too (StepLayout::gemv_slots).
  int bucket = 0;
  while (bucket + 1 < kBuckets && kBucketSizes[bucket] < n_seqs) bucket++;
  const bool mega = decode && mega_wanted(b, kBucketSizes[bucket]);
  if (mega) ensure_mega(kBucketSizes[bucket]);

  StepLayout L;
  L.action_dim = spec_.action_dim;
  InFlight f;  // f.out_seq: out row → sequence
  f.n_seqs = n_seqs;
  const int spt = attention_slots_per_tile(t_, spec_.heads, spec_.kv_heads, spec_.head_dim);
  if (graph_step) {  // padded to the bucket: sequence s >= n_seqs has one slot, no draw
    const int B = kBucketSizes[bucket];
    L.n_seqs = L.n_out = B;
    L.n_slots = L.n_tiles = L.n_one_tiles = n_slots + B - n_seqs;
    L.n_act = n_act;
    L.bt_stride = max_bt_;
    for (int s = 0; s < n_seqs; s++) f.out_seq.push_back(s);
  } else {
    L.n_slots = n_slots;
    L.n_seqs = n_seqs;
    L.bt_stride = b.blocks_per_seq;
    for (int s = 0; s < n_seqs; s++) {
      const int n_new = b.slot_start[size_t(s) + 1] - b.slot_start[size_t(s)];
      const bool one = one_slot_tiles(n_new);
      L.n_tiles += one ? n_new : (n_new + spt - 1) / spt;
      L.n_one_tiles += one ? n_new : 0;
      if (b.want_logits || b.sample[size_t(s)]) f.out_seq.push_back(s);
    }
    L.n_out = int(f.out_seq.size());
    L.n_act = n_act;
  }
  // As a graph step pads the slots (the graph branch's L.n_slots), whether or not this one is.
  L.gemv_slots = n_seqs <= kMaxGraphBatch ? n_slots + kBucketSizes[bucket] - n_seqs : n_slots;
  L.compute();
  ensure_workspace(L.n_slots, L.n_out);  // (keeps the draws of a step in flight)
  if (L.bytes > cap_in_) {
    LOOM_CUDA_CHECK(cudaStreamSynchronize(stream_));
    free_graphs();
    for (char*& h : in_host_)
      if (h) cudaFreeHost(h), h = nullptr;
    dev_free(in_dev_);
    cap_in_ = std::max(L.bytes * 2, size_t(1) << 20);
    for (char*& h : in_host_)
      LOOM_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&h), cap_in_));
    in_dev_ = static_cast<char*>(dev_alloc(cap_in_));
  }
  f.buf = next_buf_;
  next_buf_ ^= 1;
  // The buffer's previous upload (two steps ago) must have left before it is refilled.
  LOOM_CUDA_CHECK(cudaEventSynchronize(in_copied_[size_t(f.buf)]));

  // Fill the inputs (padding rows of a decode bucket write to the spare block and draw nothing).
  char* h = in_host_[size_t(f.buf)];
  auto arr = [&](size_t off) { return reinterpret_cast<int32_t*>(h + off); };
  int32_t* tokens = arr(L.tokens);
  int32_t* positions = arr(L.positions);
  int32_t* cache_slot = arr(L.cache_slot);
  int32_t* act_row = arr(L.act_row);
  int32_t* act_slots = arr(L.act_slots);
  int32_t* slot_start = arr(L.slot_start);
  int32_t* kv_len = arr(L.kv_len);
  int32_t* bt = arr(L.block_tables);
  int32_t* tiles = arr(L.tiles);
  int32_t* out_rows = arr(L.out_rows);
  auto* params = reinterpret_cast<SampleParamsDev*>(h + L.params);
  int n_future = 0;
  for (int i = 0, j = 0; i < n_slots; i++) {
    const int32_t tok = b.tokens[size_t(i)], k = future_index(tok);
    // A future names the previous step's out row; resolve_future_tokens reads its draw there.
    tokens[i] = k >= 0 ? future_token(prev_row_[size_t(k)]) : tok;
    n_future += k >= 0;
    positions[i] = b.positions[size_t(i)];
    act_row[i] = tok == kActionSlot ? j : -1;
    if (tok == kActionSlot) act_slots[j++] = i;
  }
  if (L.n_act > 0) std::memcpy(h + L.actions, b.actions.data(), b.actions.size() * sizeof(float));
  int tile = 0, chunk_tile = L.n_one_tiles;  // one-slot tiles first (StepLayout)
  for (int s = 0; s < n_seqs; s++) {
    const int s0 = b.slot_start[size_t(s)], n_new = b.slot_start[size_t(s) + 1] - s0;
    slot_start[s] = s0;
    kv_len[s] = b.kv_len[size_t(s)];
    const int32_t* src_bt = b.block_tables.data() + size_t(s) * b.blocks_per_seq;
    int32_t* dst_bt = bt + size_t(s) * L.bt_stride;
    std::copy(src_bt, src_bt + b.blocks_per_seq, dst_bt);
    std::fill(dst_bt + b.blocks_per_seq, dst_bt + L.bt_stride, -1);
    for (int j = 0; j < n_new; j++) {
      const int c = kv_len[s] + j;
      cache_slot[s0 + j] = src_bt[c / bs] * bs + c % bs;
    }
    const bool one = graph_step || one_slot_tiles(n_new);
    for (int j0 = 0; j0 < n_new; j0 += one ? 1 : spt) {
      int32_t* t = tiles + 3 * (one ? tile++ : chunk_tile++);
      t[0] = s;
      t[1] = j0;
      t[2] = one ? 1 : std::min(spt, n_new - j0);
    }
  }
  for (int s = n_seqs; s < L.n_seqs; s++) {  // bucket padding: slot and tile i, spare block
    const int i = n_slots + s - n_seqs;
    tokens[i] = 0;
    positions[i] = 0;
    act_row[i] = -1;
    cache_slot[i] = num_blocks_ * bs;
    slot_start[s] = i;
    kv_len[s] = 0;
    bt[size_t(s) * L.bt_stride] = num_blocks_;
    std::fill(bt + size_t(s) * L.bt_stride + 1, bt + size_t(s + 1) * L.bt_stride, -1);
    tiles[3 * i] = s;
    tiles[3 * i + 1] = 0;
    tiles[3 * i + 2] = 1;
  }
  slot_start[L.n_seqs] = L.n_slots;
  // The decode attention kernel with RoPE fused in (a slot a sequence: cuda_forward.cpp) takes
  // tile i as sequence i's one slot (AttentionArgs::fuse_rope) and reads neither array for it.
  if (L.one_slot_a_sequence())
    for (int i = 0; i < L.n_tiles; i++)
      LOOM_CHECK(tiles[3 * i] == i && tiles[3 * i + 1] == 0 && slot_start[i] == i,
                 "step: decode tile ", i, " holds sequence ", tiles[3 * i], " slot ",
                 tiles[3 * i + 1], " (slot_start ", slot_start[i], "), expected sequence ", i,
                 "'s one slot");
  // bf16 TMA decode of sequences sharing blocks: one stage a warp past a wave (attention_tma.cu)
  L.shared_kv = kv_t_ == DType::BF16 && attention_mma() &&
                tiles_share_blocks(tiles, L.n_one_tiles, kv_len, bt, L.bt_stride);
  shared_kv_steps_ += L.shared_kv;
  L.group_kv = L.shared_kv && tiles_group_prefix(tiles, L.n_one_tiles, kv_len, bt, L.bt_stride, bs);
  group_kv_steps_ += L.group_kv;
  prev_row_.assign(size_t(n_seqs), -1);
  for (int r = 0; r < L.n_out; r++) {
    SampleParamsDev p{};
    if (r < int(f.out_seq.size())) {
      const int s = f.out_seq[size_t(r)];
      out_rows[r] = b.slot_start[size_t(s) + 1] - 1;
      const SamplingParams& sp = b.sampling[size_t(s)];
      p.seed = sp.seed;
      p.draw_index = b.draw_index[size_t(s)];
      p.temperature = sp.temperature;
      p.top_p = sp.top_p;
      p.top_k = sp.top_k;
      p.sample_index = b.sample_index[size_t(s)];
      p.active = b.sample[size_t(s)] ? 1 : 0;
      if (p.active) prev_row_[size_t(s)] = r;
    } else {
      out_rows[r] = r;
    }
    params[r] = p;
  }

  cudaGraphExec_t* graph = nullptr;
  if (mega) {
    graph = &mega_[size_t(bucket)].graph;  // buckets 1, 2, 4, 8
  } else if (decode) {
    graph = &graphs_[size_t(bucket + kBuckets * (int(L.shared_kv) + int(L.group_kv)))];
  } else if (graph_step) {
    const std::array<int, 4> key{bucket, n_slots - n_seqs, n_act,
                                 int(L.shared_kv) + int(L.group_kv)};
    if (chunk_graphs_.count(key) != 0 || chunk_graphs_.size() < kMaxChunkGraphs)
      graph = &chunk_graphs_[key];  // a new shape is captured below
  }
  // Timed: decode graph steps only (loom bench's "gpu ms" column).
  f.timed = timing_on_ && decode && *graph != nullptr;
  auto& ev = timing_ev_[size_t(f.buf)];
  if (f.timed) LOOM_CUDA_CHECK(cudaEventRecord(ev[0], stream_));
  LOOM_CUDA_CHECK(cudaMemcpyAsync(in_dev_, h, L.bytes, cudaMemcpyHostToDevice, stream_));
  LOOM_CUDA_CHECK(cudaEventRecord(in_copied_[size_t(f.buf)], stream_));
  // The draws' ids are relative to the logit range (forward()).
  const int lo = spec_.sample_begin();
  if (n_future > 0)
    LOOM_KERNEL(resolve_future_tokens(reinterpret_cast<int32_t*>(in_dev_ + L.tokens), n_slots,
                                      tokens_, lo, stream_));
  // The tensor-core path has fixed partitions instead of splits.
  const int splits = attention_mma() ? 1 : pick_splits(L.n_tiles);
  if (graph != nullptr) {
    cudaGraphExec_t& g = *graph;
    if (g != nullptr) {
      LOOM_CUDA_CHECK(cudaGraphLaunch(g, stream_));
    } else {
      forward(L, splits, mega);  // this step, eagerly; then capture the bucket for the next ones
      const auto t_capture = std::chrono::steady_clock::now();
      g = capture_forward(L, splits, mega);
      if (timing_on_) timing_.captures++, timing_.capture_s += seconds_since(t_capture);
    }
    if (decode) last_graph_[size_t(bucket)] = g;
    if (!decode) chunk_graph_steps_++;
    if (mega) {  // the sync block's header: collect() checks that no wait gave up
      LOOM_CUDA_CHECK(cudaMemcpyAsync(mega_header_host_[size_t(f.buf)], mega_[size_t(bucket)].sync,
                                      sizeof(mega::MegaSyncHeader), cudaMemcpyDeviceToHost,
                                      stream_));
      f.mega_batch = kBucketSizes[bucket];
      mega_steps_++;
      if (mega_debug_.trace) add_mega_trace(f.mega_batch);
    }
  } else {
    // --profile: every 16th decode step is also timed as the graph path runs it (loom bench's
    // attn ms / rest ms: eager launches with an event pair each overstate the short kernels).
    if (profiling_ && n_slots == n_seqs && n_act == 0 && prof_decode_steps_++ % 16 == 0)
      time_graph_split(L, splits);
    forward(L, splits);
  }
  if (!f.out_seq.empty())
    LOOM_CUDA_CHECK(cudaMemcpyAsync(tokens_host_[size_t(f.buf)], tokens_, f.out_seq.size() * 4,
                                    cudaMemcpyDeviceToHost, stream_));
  if (b.want_logits) {
    // want_logits puts every sequence in out_seq, in order: out row s is sequence s. The draw
    // read bf16 logits where the lm_head GEMM wrote them (forward()): widened here, exactly.
    if (!mega && logits_bf16(L))
      LOOM_KERNEL(convert(DType::BF16, logits_t_, DType::F32, logits_, size_t(L.n_out) * logits_ld_,
                          stream_));
    f.logits.resize(size_t(n_seqs) * spec_.vocab);
    LOOM_CUDA_CHECK(cudaMemcpy2DAsync(f.logits.data(), size_t(spec_.vocab) * 4, logits_,
                                      size_t(logits_ld_) * 4, size_t(spec_.vocab) * 4,
                                      size_t(n_seqs), cudaMemcpyDeviceToHost, stream_));
  }
  if (f.timed) LOOM_CUDA_CHECK(cudaEventRecord(ev[1], stream_));
  LOOM_CUDA_CHECK(cudaEventRecord(step_done_[size_t(f.buf)], stream_));
  f.host_s = seconds_since(t_enter);
  // Logits land in pageable memory and profiles read every kernel's events: such steps end
  // here (they are for tests and --profile, not for speed).
  if (b.want_logits || profiling_) {
    LOOM_CUDA_CHECK(cudaStreamSynchronize(stream_));
    if (profiling_) {
      int one = 0;  // sequences with one new slot
      for (int s = 0; s < n_seqs; s++)
        one += b.slot_start[size_t(s) + 1] - b.slot_start[size_t(s)] == 1;
      prof_collect(one == n_seqs ? "decode" : one == 0 ? "prefill" : "mixed");
    }
  }
  in_flight_.push_back(std::move(f));
}

void CudaBackend::collect(StepOutput& out) {
  LOOM_CHECK(!in_flight_.empty(), "CUDA backend: collect without a submitted step");
  InFlight f = std::move(in_flight_.front());
  in_flight_.pop_front();
  LOOM_CUDA_CHECK(cudaEventSynchronize(step_done_[size_t(f.buf)]));
  if (f.mega_batch > 0) check_mega_trap(f.buf, f.mega_batch);
  if (f.timed) {
    float ms = 0;
    const auto& ev = timing_ev_[size_t(f.buf)];
    LOOM_CUDA_CHECK(cudaEventElapsedTime(&ms, ev[0], ev[1]));
    timing_.steps++;
    timing_.gpu_s += 1e-3 * double(ms);
    timing_.host_s += f.host_s;
  }
  out.tokens.assign(size_t(f.n_seqs), -1);
  const int lo = spec_.sample_begin();
  const int32_t* drawn = tokens_host_[size_t(f.buf)];
  for (size_t r = 0; r < f.out_seq.size(); r++)
    out.tokens[size_t(f.out_seq[r])] = drawn[r] >= 0 ? drawn[r] + lo : -1;
  out.logits = std::move(f.logits);
}

cudaGraphExec_t CudaBackend::capture_forward(const StepLayout& L, int splits, bool mega) {
  cudaGraph_t captured = nullptr;
  LOOM_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  try {
    forward(L, splits, mega);
  } catch (...) {
    cudaStreamEndCapture(stream_, &captured);
    if (captured) cudaGraphDestroy(captured);
    throw;
  }
  LOOM_CUDA_CHECK(cudaStreamEndCapture(stream_, &captured));
  cudaGraphExec_t g = nullptr;
  const cudaError_t e = cudaGraphInstantiate(&g, captured, 0);
  cudaGraphDestroy(captured);
  LOOM_CUDA_CHECK(e);
  return g;
}

// This decode step captured as a graph whole and with rope + attention left out, each replayed
// kReplays times after a warm-up: the "decode graph" phase of kernel_times. The replays read
// the inputs step() uploaded and write what the step itself writes (the same KV rows and
// draws; the cut one writes none), so the step's results do not change.
void CudaBackend::time_graph_split(const StepLayout& L, int splits) {
  constexpr int kReplays = 3;
  struct Restore {  // profiling on, the skip mask as it was, the events pooled, also on a throw
    CudaBackend& be;
    int skip;
    cudaEvent_t ev[2];
    ~Restore() {
      be.profiling_ = true;
      be.debug_skip_ = skip;
      be.event_pool_.insert(be.event_pool_.end(), ev, ev + 2);
    }
  } r{*this, debug_skip_, {pooled_event(), pooled_event()}};
  const cudaEvent_t* ev = r.ev;
  profiling_ = false;  // no event pairs inside the captures
  for (const bool cut : {false, true}) {
    debug_skip_ = cut ? (r.skip | 1) : r.skip;
    cudaGraphExec_t g = capture_forward(L, splits, false);
    LOOM_CUDA_CHECK(cudaGraphLaunch(g, stream_));
    LOOM_CUDA_CHECK(cudaEventRecord(ev[0], stream_));
    for (int i = 0; i < kReplays; i++) LOOM_CUDA_CHECK(cudaGraphLaunch(g, stream_));
    LOOM_CUDA_CHECK(cudaEventRecord(ev[1], stream_));
    LOOM_CUDA_CHECK(cudaEventSynchronize(ev[1]));
    cudaGraphExecDestroy(g);
    float ms = 0;
    LOOM_CUDA_CHECK(cudaEventElapsedTime(&ms, ev[0], ev[1]));
    KernelTime& k = prof_totals_[cut ? "decode graph/without attention" : "decode graph/step"];
    k.name = cut ? "without attention" : "step";
    k.phase = "decode graph";
    k.ms += ms / kReplays;
    k.calls++;
  }
  prof_steps_["decode graph"]++;
}

}  // namespace loom::gpu
