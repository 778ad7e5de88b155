#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <deque>

#include "core/error.h"
#include "engine/kv_cache.h"

namespace loom {
namespace {

double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

JobResult error_result(const JobError& e) {
  JobResult r;
  r.id = e.id;
  r.id_is_number = e.id_is_number;
  r.line = e.line;
  r.line_hash = e.line_hash;
  r.ok = false;
  r.error = e.message;
  return r;
}

JobResult finished_result(const Running& r, bool frames) {
  const Sequence& s = *r.seq;
  JobResult out;
  out.id = s.job().id;
  out.id_is_number = s.job().id_is_number;
  out.line = s.job().line;
  out.line_hash = s.job().line_hash;
  out.sample = s.sample();
  out.job = s.job_ptr();
  out.seed = s.job().sampling.seed;
  out.has_frames = frames;
  if (frames) {
    out.frames = s.frames();
  } else {
    out.tokens = s.tokens();
    out.finish_reason = s.stopped_at_eos() ? "eos" : "length";
  }
  out.prompt_slots = s.prompt_slots();
  out.cached_slots = s.cached_slots();
  const double end = r.t_done;  // (t_frame stays at admission for models without frames)
  out.queue_s = r.t_admit - r.t_read;
  out.prefill_s = r.t_first >= 0 ? r.t_first - r.t_admit : 0;
  out.decode_s = r.t_first >= 0 ? end - r.t_first : 0;
  out.total_s = end - r.t_admit;
  out.frame_s = r.frame_s;
  return out;
}

// A finished sample's queue time, time to first token and time per output token.
// image_tokens: tokens per frame (frame models), 0 for plain models.
void add_latencies(const Running& r, int image_tokens, RunStats& st) {
  st.queue_s.add(r.t_admit - r.t_read);
  if (r.t_first < 0) return;
  st.ttft_s.add(r.t_first - r.t_read);
  const Sequence& s = *r.seq;
  const int64_t n =
      image_tokens > 0 ? int64_t(s.frames().size()) * image_tokens : int64_t(s.tokens().size());
  if (n > 1) st.tpot_s.add((r.t_done - r.t_first) / double(n - 1));
}

}  // namespace

void FrameTimes::add(double s) {
  count_++;
  sum_ += s;
  max_ = std::max(max_, s);
  if (sample_.size() < kCapacity) {
    sample_.push_back(s);
    return;
  }
  rng_ ^= rng_ << 13;  // xorshift64: reservoir sampling keeps each value with p = cap / count
  rng_ ^= rng_ >> 7;
  rng_ ^= rng_ << 17;
  const uint64_t j = rng_ % uint64_t(count_);
  if (j < kCapacity) sample_[size_t(j)] = s;
}

double FrameTimes::percentile(double q) const {
  if (sample_.empty()) return 0;
  std::vector<double> v = sample_;
  const size_t i = std::min(v.size() - 1, size_t(q * double(v.size() - 1) + 0.5));
  std::nth_element(v.begin(), v.begin() + long(i), v.end());
  return v[i];
}

Engine::Engine(const ModelSpec& spec, Backend& backend, EngineOptions options)
    : spec_(spec), backend_(backend), opt_(std::move(options)) {}

RunStats Engine::run(const JobSource& source, const ResultSink& sink) {
  RunStats st;
  // The pool is set up before the run's clock starts: its time grows with the pool (tens of
  // ms for a large one on the cpu), not with the work, and would bend tokens/s.
  const double t_pool = now_s();
  CacheRequest pool = opt_.cache;
  pool.step_slots = opt_.scheduler.max_batch_slots;
  pool.step_seqs = opt_.scheduler.max_seqs;
  const int num_blocks = backend_.allocate_cache(pool);
  KvCache cache(num_blocks, opt_.cache.block_size);
  Scheduler sched(spec_, cache, opt_.scheduler);
  st.kv_blocks = num_blocks;
  st.block_size = opt_.cache.block_size;
  st.kv_block_bytes = backend_.kv_block_bytes(opt_.cache.block_size);
  st.pool_s = now_s() - t_pool;
  if (opt_.on_start) opt_.on_start(st);
  const double t0 = now_s();

  // Jobs read ahead of the scheduler: twice what one step can hold (in 64 bits: --max-seqs may
  // be up to 2^31 - 1).
  const int64_t lookahead =
      opt_.lookahead_jobs > 0 ? opt_.lookahead_jobs : 2 * int64_t(opt_.scheduler.max_seqs);
  struct Waiting {
    std::unique_ptr<Sequence> seq;
    double read_at;
  };
  std::deque<Waiting> waiting;
  bool input_done = false;
  auto stopping = [&] { return opt_.stop && opt_.stop->load(); };
  const bool frames = spec_.has_frames();

  StepBatch batch;
  StepOutput out;
  std::vector<Running> done;
  // Submitted steps not yet collected (two while the host stages a step during the previous
  // one's device work): their kind and when they were submitted.
  struct Submitted {
    bool prefill = false, decode = false;
    double t = 0;
  };
  std::deque<Submitted> submitted;
  double t_collected = now_s();
  // Waits for the oldest submitted step and applies it. Its time is the wall time since it was
  // submitted or since the step before it was collected, whichever is later.
  auto collect = [&] {
    const Submitted sub = submitted.front();
    submitted.pop_front();
    backend_.collect(out);
    const double te = now_s(), dt = te - std::max(sub.t, t_collected);
    t_collected = te;
    if (sub.prefill && sub.decode) {
      st.mixed_s += dt;
      st.mixed_steps++;
    } else if (sub.prefill) {
      st.prefill_s += dt;
      st.prefill_steps++;
    } else {
      st.decode_s += dt;
      st.decode_steps++;
    }
    if (opt_.on_logits) {  // (steps are not pipelined then: the last scheduled is this one)
      const auto& seqs = sched.last_step_sequences();
      for (size_t i = 0; i < seqs.size(); i++)
        if (batch.sample[i])
          opt_.on_logits(*seqs[i], out.logits.data() + i * size_t(spec_.vocab), spec_.vocab);
    }
    done.clear();
    sched.complete(out, te, done);
    for (const Running& r : done) {
      st.samples_done++;
      st.frames += int64_t(r.seq->frames().size());
      for (double f : r.frame_s) st.frame_s.add(f);
      add_latencies(r, frames ? spec_.image_tokens : 0, st);
      const JobResult res = finished_result(r, frames);
      st.tokens_written +=
          frames ? int64_t(res.frames.size()) * spec_.image_tokens : int64_t(res.tokens.size());
      sink(res);
    }
    if (opt_.on_progress) {
      st.wall_s = now_s() - t0;
      st.scheduler = sched.stats();
      opt_.on_progress(st);
    }
  };
  while (true) {
    // Read ahead while there is room in the waiting line.
    while (!input_done && !stopping() && int64_t(waiting.size()) < lookahead) {
      const bool busy = !waiting.empty() || !sched.idle();
      if (busy && opt_.input_ready && !opt_.input_ready()) break;  // a pipe with no line yet
      Job job;
      JobError err;
      bool ok = false;
      if (!source(job, err, ok)) {
        if (opt_.input_paused && opt_.input_paused()) {
          if (busy) break;  // run what there is; read on after the step
          continue;         // nothing else to do: wait in the read
        }
        input_done = true;
        break;
      }
      st.jobs_read++;
      if (!ok) {
        st.jobs_failed++;
        sink(error_result(err));
        continue;
      }
      auto shared = std::make_shared<const Job>(std::move(job));
      std::vector<std::unique_ptr<Sequence>> samples;
      const int64_t job_frames = frames ? shared->num_frames : 0;
      for (int k = 0; k < shared->num_samples; k++) {
        if (opt_.keep_sample && !opt_.keep_sample(*shared, uint32_t(k))) {
          st.samples_skipped++;
          st.frames_skipped += job_frames;
          continue;
        }
        samples.push_back(std::make_unique<Sequence>(shared, uint32_t(k), spec_));
      }
      st.samples_read += shared->num_samples;
      st.frames_read += job_frames * shared->num_samples;
      if (samples.empty()) continue;
      const int need = sched.blocks_for(*samples.front());
      if (need > num_blocks) {
        st.jobs_failed++;
        st.samples_read -= int64_t(samples.size());  // they will never run
        st.frames_read -= job_frames * int64_t(samples.size());
        sink(error_result(JobError{
            shared->id, shared->line,
            cat("line ", shared->line, ": job needs ", need, " KV blocks of ",
                opt_.cache.block_size, " slots for one round, the cache holds ", num_blocks,
                opt_.cache.num_blocks > 0  // a count the user fixed (--kv-blocks)
                    ? "; raise --kv-blocks or shorten the job"
                    : "; raise --gpu-memory-fraction/--kv-cache-gib or shorten the job"),
            shared->id_is_number}));
        continue;
      }
      st.jobs_ok++;
      const double read_at = now_s();
      for (auto& s : samples) waiting.push_back({std::move(s), read_at});
    }
    // Admit in order while blocks and batch slots allow.
    while (!stopping() && !waiting.empty() && sched.can_admit(*waiting.front().seq)) {
      sched.admit(std::move(waiting.front().seq), now_s(), waiting.front().read_at);
      waiting.pop_front();
    }
    if (stopping()) break;
    if (!sched.schedule(batch)) {
      if (!submitted.empty()) {  // what the running step draws may make more runnable
        collect();
        continue;
      }
      // Never leave with sequences unfinished: that would lose their records silently.
      LOOM_CHECK(sched.idle(), "engine: ", sched.running(),
                 " sequences running and none can be scheduled");
      if (waiting.empty() && input_done) break;
      LOOM_CHECK(!sched.idle(), "engine: nothing runnable and nothing admissible");
      continue;
    }
    batch.want_logits = bool(opt_.on_logits);
    // Pipelined: a blind step's sequences go on as if its draws were known, so the host
    // schedules and stages the next step while this one runs on the device.
    const bool pipelined = opt_.pipeline && !opt_.on_logits && sched.step_blind();
    for (uint8_t s : batch.sample) st.tokens += s;
    submitted.push_back({sched.step_has_prefill(), sched.step_has_decode(), now_s()});
    backend_.submit(batch);
    if (submitted.size() == 2) collect();  // the step before, which ran while this one staged
    sched.launch(pipelined);
    if (!pipelined) collect();
  }
  while (!submitted.empty()) collect();  // (a stop leaves with a step in flight)
  if (stopping()) {
    st.stopped = true;
    done.clear();
    sched.abandon_all(done);
    st.samples_abandoned = int64_t(done.size() + waiting.size());
    st.samples_abandoned_started = int64_t(done.size());
  }
  st.wall_s = now_s() - t0;
  st.scheduler = sched.stats();
  st.kv_peak_blocks = cache.peak_used_blocks();
  return st;
}

}  // namespace loom
