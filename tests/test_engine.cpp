// Engine, scheduler, KV cache and the frame loop, on a fake backend whose "model" is a hash of
// everything in the attention window read through the block tables. A wrong block table, a
// shared block with the wrong content, a slot at the wrong position or a missing action row
// changes the tokens, so the streams below check paging, prefix sharing and design §4 at once.
#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <map>
#include <random>
#include <set>

#include "core/error.h"
#include "engine/engine.h"
#include "engine/kv_cache.h"
#include "engine/sequence.h"

#include "job_source.h"
#include "tiny_spec.h"

using namespace loom;

namespace {

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}

// Value of one slot as the fake model sees it: its input and its position.
uint64_t slot_value(int32_t token, const float* action, int dim, int position) {
  uint64_t h = mix(uint64_t(uint32_t(token)), uint64_t(position));
  for (int d = 0; action && d < dim; d++) {
    uint32_t bits;
    std::memcpy(&bits, &action[d], 4);
    h = mix(h, bits);
  }
  return h;
}

uint64_t fold(const std::vector<uint64_t>& window) {
  uint64_t h = 1;
  for (uint64_t v : window) h = mix(h, v);
  return h;
}

int32_t fake_token(uint64_t h, const StepBatch& b, int s, int vocab) {
  return int32_t(mix(h, mix(b.sampling[size_t(s)].seed,
                            mix(b.sample_index[size_t(s)], b.draw_index[size_t(s)]))) %
                 uint64_t(vocab - 1));
}

class FakeBackend : public Backend {
 public:
  explicit FakeBackend(ModelSpec spec, int max_seqs = 1 << 30, int max_slots = 1 << 30)
      : spec_(spec), max_seqs_(max_seqs), max_slots_(max_slots) {}
  std::string name() const override { return "fake"; }
  void load(const ModelSpec&, const Weights&) override {}
  size_t kv_block_bytes(int) const override { return 1; }
  int allocate_cache(const CacheRequest& r) override {
    request = r;
    block_size_ = r.block_size;
    cache_.assign(size_t(r.num_blocks) * size_t(r.block_size), 0);
    return r.num_blocks;
  }
  void submit(const StepBatch& b) override {
    for (int32_t t : b.tokens) futures += future_index(t) >= 0;
    submits++;
    Backend::submit(b);  // resolves the futures from the previous step's draws
  }
  void collect(StepOutput& out) override {
    collects++;
    Backend::collect(out);
  }
  void step(const StepBatch& b, StepOutput& out) override {
    out.tokens.assign(size_t(b.n_seqs()), -1);
    max_batch = std::max(max_batch, b.n_seqs());
    max_slots = std::max(max_slots, b.n_slots());
    REQUIRE(b.n_seqs() <= max_seqs_);  // the scheduler's limits hold in every step
    REQUIRE(b.n_slots() <= max_slots_);
    REQUIRE(int(b.slot_start.size()) == b.n_seqs() + 1);
    for (int s = 0; s < b.n_seqs(); s++) {
      const int32_t* table = b.block_tables.data() + size_t(s) * size_t(b.blocks_per_seq);
      auto at = [&](int i) -> uint64_t& {
        return cache_[size_t(table[i / block_size_]) * size_t(block_size_) +
                      size_t(i % block_size_)];
      };
      for (int i = b.slot_start[size_t(s)]; i < b.slot_start[size_t(s) + 1]; i++) {
        const int j = i - b.slot_start[size_t(s)];
        REQUIRE(b.positions[size_t(i)] == b.kv_len[size_t(s)] + j);
        const bool action = b.tokens[size_t(i)] == kActionSlot;
        at(b.kv_len[size_t(s)] + j) =
            slot_value(b.tokens[size_t(i)], action ? &b.actions[size_t(i) * 3] : nullptr, 3,
                       b.positions[size_t(i)]);
      }
      if (!b.sample[size_t(s)]) continue;
      std::vector<uint64_t> window;
      const int end = b.kv_len[size_t(s)] + b.slot_start[size_t(s) + 1] - b.slot_start[size_t(s)];
      for (int i = 0; i < end; i++) window.push_back(at(i));
      out.tokens[size_t(s)] = fake_token(fold(window), b, s, spec_.vocab);
    }
  }
  CacheRequest request;              // the last allocate_cache's
  int max_batch = 0, max_slots = 0;  // the largest step seen, in sequences and slots
  int64_t futures = 0;               // slots fed a draw of the step before (pipelined steps)
  int64_t submits = 0, collects = 0;

 private:
  ModelSpec spec_;
  int max_seqs_, max_slots_;
  int block_size_ = 16;
  std::vector<uint64_t> cache_;  // [num_blocks * block_size] slot values
};

// The reference: design §4 with the whole round recomputed for every token.
std::vector<std::vector<int32_t>> reference_frames(const Job& job, uint32_t sample,
                                                   const ModelSpec& sp) {
  const int P = sp.image_tokens, A = sp.action_tokens, S = P + A, T = sp.temporal_rows;
  std::vector<std::vector<int32_t>> all;  // every frame's image ids, context first
  for (int f = 0; f < job.context_frames; f++)
    all.emplace_back(job.prompt.begin() + f * S, job.prompt.begin() + f * S + P);
  int first = 0;  // first frame of the round
  std::vector<std::vector<int32_t>> out;
  for (int g = 0; g < job.num_frames; g++) {
    if (int(all.size()) - first == T) first = int(all.size()) - job.overlap;
    std::vector<int32_t> cur;
    for (int t = 0; t < P; t++) {
      std::vector<uint64_t> window;
      int pos = 0;
      for (int f = first; f < int(all.size()); f++) {
        for (int i = 0; i < P; i++)
          window.push_back(slot_value(all[size_t(f)][size_t(i)], nullptr, 3, pos++));
        for (int a = 0; a < A; a++)
          window.push_back(slot_value(kActionSlot, &job.actions[size_t(f * A + a) * 3], 3, pos++));
      }
      for (int32_t tok : cur) window.push_back(slot_value(tok, nullptr, 3, pos++));
      StepBatch b;
      b.sampling = {job.sampling};
      b.sample_index = {sample};
      b.draw_index = {uint64_t(g * P + t)};
      cur.push_back(fake_token(fold(window), b, 0, sp.vocab));
    }
    all.push_back(cur);
    out.push_back(cur);
  }
  return out;
}

Job make_job(const ModelSpec& sp, const std::string& id, int n_ctx, int frames, uint64_t seed,
             int context_variant, int samples = 1) {
  const int P = sp.image_tokens, A = sp.action_tokens;
  Job j;
  j.id = id;
  j.context_frames = n_ctx;
  j.num_frames = frames;
  j.num_samples = samples;
  j.sampling.temperature = 1.0f;
  j.sampling.seed = seed;
  for (int f = 0; f < n_ctx; f++) {
    for (int t = 0; t < P; t++) j.prompt.push_back((f * 31 + t * 7 + context_variant) % 999);
    for (int a = 0; a < A; a++) j.prompt.push_back(-3);
  }
  j.action_rows = A * (n_ctx + frames);
  for (int r = 0; r < j.action_rows; r++)
    for (int d = 0; d < 3; d++) j.actions.push_back(0.25f * float(r) - 0.5f * float(d));
  return j;
}

struct RunOut {
  std::map<std::pair<std::string, uint32_t>, std::vector<std::vector<int32_t>>> frames;
  RunStats stats;
  int max_batch = 0, max_slots = 0;
  int64_t futures = 0;
};

RunOut run_jobs(const std::vector<Job>& jobs, int max_seqs, int num_blocks, bool sharing,
                int block_size = 4, int max_slots = 64, bool pipeline = true) {
  ModelSpec sp = loom::test::tiny_frame_spec();
  FakeBackend be(sp, max_seqs, max_slots);
  EngineOptions opt;
  opt.scheduler.max_seqs = max_seqs;
  opt.scheduler.max_batch_slots = max_slots;
  opt.scheduler.prefix_sharing = sharing;
  opt.cache.block_size = block_size;
  opt.cache.num_blocks = num_blocks;
  opt.pipeline = pipeline;
  Engine engine(sp, be, opt);
  RunOut out;
  out.stats = engine.run(loom::test::source_of(jobs), [&](const JobResult& r) {
    REQUIRE(r.ok);
    out.frames[{r.id, r.sample}] = r.frames;
  });
  out.max_batch = be.max_batch;
  out.max_slots = be.max_slots;
  out.futures = be.futures;
  return out;
}

}  // namespace

TEST_CASE("frame layout: action slots, the 7-slot chunk and positions across rounds") {
  ModelSpec sp = loom::test::tiny_frame_spec();
  auto job = std::make_shared<Job>(make_job(sp, "a", 3, 8, 1, 0));
  Sequence s(job, 0, sp);
  CHECK(s.prompt_len() == 39);
  CHECK(s.pending() == 39);
  for (int slot = 0; slot < 39; slot++) {
    const bool action = slot % 13 >= 10;
    CHECK((s.token_at(slot) == kActionSlot) == action);
    if (action)
      CHECK(s.action_at(slot) == &job->actions[size_t((slot / 13) * 3 + slot % 13 - 10) * 3]);
  }
  s.advance(39);
  for (int t = 0; t < 9; t++) {  // tokens 0..8 of generated frame 0 are single slots
    CHECK_FALSE(s.on_token(100 + t));
    CHECK(s.pending() == 1);
    CHECK(s.token_at(s.kv_len()) == 100 + t);
    s.advance(1);
  }
  CHECK_FALSE(s.on_token(109));  // frame complete: its last token plus 3 action slots
  CHECK(s.pending() == 4);
  CHECK(s.kv_len() == 48);
  CHECK(s.token_at(48) == 109);
  for (int a = 0; a < 3; a++) {
    CHECK(s.token_at(49 + a) == kActionSlot);
    CHECK(s.action_at(49 + a) == &job->actions[size_t(9 + a) * 3]);  // rows of global frame 3
  }
  s.advance(4);
  // Frames 1 and 2 fill the round (3 context + 3 generated = T = 6).
  int round_changes = 0;
  for (int t = 0; t < 20; t++) {
    if (s.on_token(200 + t)) round_changes++;
    s.advance(s.pending());
  }
  CHECK(round_changes == 1);
  CHECK(s.round() == 1);
  CHECK(s.frames().size() == 3);
  // The new round's prompt is generated frames 0, 1, 2 (global 3, 4, 5) at position 0.
  CHECK(s.prompt_len() == 39);
  CHECK(s.token_at(0) == 100);
  CHECK(s.token_at(13) == 200);
  CHECK(s.token_at(26) == 210);
  CHECK(s.action_at(10) == &job->actions[size_t(9) * 3]);
  CHECK(s.action_at(38) == &job->actions[size_t(17) * 3]);
  CHECK(s.draw_index() == 30);
}

TEST_CASE("an undrawn token: the sequence goes on, resolve() puts the draw everywhere it went") {
  ModelSpec sp = loom::test::tiny_frame_spec();  // P = 10, A = 3, T = 6
  auto job = std::make_shared<Job>(make_job(sp, "a", 3, 8, 1, 0));
  Sequence s(job, 0, sp), ref(job, 0, sp);
  CHECK(s.draws_blind());
  s.advance(39);
  ref.advance(39);
  int rounds = 0;
  for (int t = 0; t < 40; t++) {  // through frame ends (a 4-slot chunk) and a round change
    const bool new_round = s.on_token(Sequence::kUndrawn);
    CHECK(s.undrawn());
    CHECK_THROWS_AS(s.on_token(5), Error);  // one undrawn token at a time
    CHECK(new_round == ref.on_token(300 + t));
    rounds += new_round;
    CHECK(s.pending() == ref.pending());
    s.resolve(300 + t);
    CHECK_FALSE(s.undrawn());
    CHECK(s.round_tokens() == ref.round_tokens());
    CHECK(s.frames() == ref.frames());
    s.advance(s.pending());
    ref.advance(ref.pending());
  }
  CHECK(rounds == 1);
  CHECK_THROWS_AS(s.resolve(7), Error);  // nothing undrawn
  // A plain model that may stop at EOS cannot go on blind.
  ModelSpec plain = sp;
  plain.image_tokens = plain.action_tokens = plain.temporal_rows = 0;
  plain.eos_id = 3;
  Job pj;
  pj.prompt = {1, 2};
  pj.max_tokens = 4;
  Sequence p(std::make_shared<Job>(pj), 0, plain);
  p.advance(2);
  CHECK_FALSE(p.draws_blind());
  CHECK_THROWS_AS(p.on_token(Sequence::kUndrawn), Error);
}

TEST_CASE("engine streams equal the full-recompute reference across two round changes") {
  ModelSpec sp = loom::test::tiny_frame_spec();
  std::vector<Job> jobs = {make_job(sp, "a", 3, 8, 11, 0), make_job(sp, "b", 1, 5, 12, 1),
                           make_job(sp, "c", 2, 9, 13, 2, 2), make_job(sp, "d", 6, 4, 14, 3)};
  RunOut got = run_jobs(jobs, 8, 200, true);
  for (const Job& j : jobs)
    for (uint32_t k = 0; k < uint32_t(j.num_samples); k++) {
      CAPTURE(j.id);
      CAPTURE(k);
      CHECK(got.frames.at({j.id, k}) == reference_frames(j, k, sp));
    }
  CHECK(got.max_batch > 1);
  CHECK(got.stats.frames == 8 + 5 + 9 * 2 + 4);
  CHECK(got.stats.tokens == got.stats.frames * 10);
}

// 12 jobs (18 samples) of 3 context + 7 generated frames, three different contexts.
static std::vector<Job> twelve_jobs(const std::string& prefix, uint64_t seed) {
  const ModelSpec sp = loom::test::tiny_frame_spec();
  std::vector<Job> jobs;
  for (int i = 0; i < 12; i++)
    jobs.push_back(
        make_job(sp, prefix + std::to_string(i), 3, 7, seed + uint64_t(i), i % 3, 1 + i % 2));
  return jobs;
}

TEST_CASE("a job's tokens do not depend on the batch around it, the block size or sharing") {
  const std::vector<Job> jobs = twelve_jobs("j", 100);
  RunOut alone = run_jobs(jobs, 1, 40, false, 4);
  RunOut crowded = run_jobs(jobs, 64, 400, true, 4);
  RunOut tight =
      run_jobs(jobs, 64, 60, true, 16, 20);  // few blocks: admission waits, preemption, reuse
  CHECK(alone.frames == crowded.frames);
  CHECK(alone.frames == tight.frames);
  CHECK(alone.max_batch == 1);
  CHECK(crowded.max_batch > 8);
  // The run's stats say the largest step the backend saw, within the step budget (tight's 20
  // slots cut its prompts into chunks).
  for (const RunOut* r : {&alone, &crowded, &tight}) {
    CHECK(r->stats.scheduler.max_batch == r->max_batch);
    CHECK(r->stats.scheduler.max_slots == r->max_slots);
  }
  CHECK(tight.max_slots == 20);
  CHECK(crowded.max_slots > tight.max_slots);
}

TEST_CASE("preemption: a pool too small for every job at once, the same tokens") {
  // 12 jobs (18 samples) of 3 context + 7 generated frames: a round of 10 frames is 130 slots
  // (33 blocks of 4, 9 of 16). The pools below hold one to four rounds: jobs are admitted on
  // their prompts, run out of blocks as they grow, and the youngest are preempted and
  // recomputed (resumes share their own old prompt blocks when the cache still has them).
  const std::vector<Job> jobs = twelve_jobs("p", 300);
  RunOut alone = run_jobs(jobs, 1, 40, false, 4);
  CHECK(alone.stats.scheduler.preemptions == 0);
  struct Pool {
    int block_size, blocks, slots;
  };
  for (Pool p : {Pool{4, 45, 20}, Pool{4, 60, 20}, Pool{4, 80, 64}, Pool{16, 10, 20},
                 Pool{16, 20, 64}, Pool{16, 45, 64}})
    for (bool sharing : {false, true}) {
      CAPTURE(p.block_size);
      CAPTURE(p.blocks);
      CAPTURE(sharing);
      RunOut tight = run_jobs(jobs, 64, p.blocks, sharing, p.block_size, p.slots);
      CHECK(tight.frames == alone.frames);
      CHECK(tight.stats.scheduler.preemptions > 0);
      CHECK(tight.stats.scheduler.recomputed > 0);
      CHECK(tight.stats.kv_peak_blocks <= p.blocks);
    }
}

// Random pools, block sizes, batch limits and sequence limits over jobs of 1-4 context frames
// and 2-14 frames (some crossing a round): every run finishes with the frames of a run alone.
// (A preempted sequence whose round the prefix cache held but for its last slot began that
// round decoding, after the decode pass: a step with only it stopped the run with "none can be
// scheduled".)
TEST_CASE("no pool that holds each job's round deadlocks, whatever the limits") {
  const ModelSpec sp = loom::test::tiny_frame_spec();
  std::vector<Job> jobs;
  std::mt19937 rng(7);
  for (int i = 0; i < 10; i++) {
    const int ctx = 1 + int(rng() % 4), frames = 2 + int(rng() % 13);
    jobs.push_back(make_job(sp, "d" + std::to_string(i), ctx, frames, 500 + uint64_t(i),
                            int(rng() % 2), 1 + int(rng() % 3)));
  }
  RunOut alone = run_jobs(jobs, 1, 1000, false, 4);
  int round_slots = 0;  // the longest round of any job: the least pool that holds each
  for (const Job& j : jobs)
    round_slots =
        std::max(round_slots, Sequence(std::make_shared<Job>(j), 0, sp).max_round_slots());
  int preempted = 0;
  for (int trial = 0; trial < 400; trial++) {
    const int bs = std::vector<int>{1, 2, 3, 4, 5, 7, 8, 16}[rng() % 8];
    const int need = (round_slots + bs - 1) / bs;
    const int blocks = need + int(rng() % uint32_t(2 * need + 4));
    const int seqs = std::vector<int>{1, 2, 3, 4, 8, 64}[rng() % 6];
    const int slots = std::vector<int>{sp.action_tokens + 1, 13, 64, 2048}[rng() % 4];
    const bool sharing = rng() % 4 != 0, pipeline = rng() % 2 == 0;
    CAPTURE(bs);
    CAPTURE(blocks);
    CAPTURE(seqs);
    CAPTURE(slots);
    CAPTURE(sharing);
    CAPTURE(pipeline);
    RunOut r = run_jobs(jobs, seqs, blocks, sharing, bs, slots, pipeline);
    CHECK(r.frames == alone.frames);
    preempted += r.stats.scheduler.preemptions > 0;
  }
  CHECK(preempted > 80);  // the sweep reaches the tight pools it is about
}

TEST_CASE("pipelined steps: the tokens of waiting for every step, each step fed the last's draws") {
  // Preemption (small pools), prefix sharing and round changes while the host runs a step
  // ahead of the device: the same frames as the sync engine, and slots took draws as futures.
  const std::vector<Job> jobs = twelve_jobs("q", 500);
  for (int blocks : {45, 400}) {
    CAPTURE(blocks);
    RunOut sync = run_jobs(jobs, 64, blocks, true, 4, 20, false);
    RunOut piped = run_jobs(jobs, 64, blocks, true, 4, 20, true);
    CHECK(piped.frames == sync.frames);
    CHECK(sync.futures == 0);
    CHECK(piped.futures > piped.stats.tokens / 2);  // most draws were fed before they were known
    CHECK(piped.stats.tokens == sync.stats.tokens);
    CHECK(piped.stats.frames == sync.stats.frames);
    CHECK((blocks == 400 || piped.stats.scheduler.preemptions > 0));
  }
}

TEST_CASE("a stop while a pipelined step is in flight: finished samples whole, none lost") {
  // The stop is asked for from the sink (results come as the engine collects a step, the next
  // one already submitted): the engine collects that step, then abandons what is running.
  const ModelSpec sp = loom::test::tiny_frame_spec();
  std::vector<Job> jobs;  // 2 to 7 frames: they finish at different steps
  for (int i = 0; i < 12; i++)
    jobs.push_back(make_job(sp, "s" + std::to_string(i), 2, 2 + i % 6, 700 + i, i % 3));
  FakeBackend be(sp);
  std::atomic<bool> stop{false};
  EngineOptions opt;
  opt.scheduler.max_seqs = 64;
  opt.cache.block_size = 4;
  opt.cache.num_blocks = 400;
  opt.stop = &stop;
  Engine engine(sp, be, opt);
  int emitted = 0;
  const RunStats st = engine.run(loom::test::source_of(jobs), [&](const JobResult& r) {
    REQUIRE(r.ok);
    const Job& j = *r.job;
    CHECK(r.frames == reference_frames(j, r.sample, sp));  // complete and right
    if (++emitted == 3) stop = true;
  });
  CHECK(st.stopped);
  CHECK(be.futures > 0);
  CHECK(st.samples_done == emitted);
  CHECK(st.samples_done >= 3);
  CHECK(st.samples_done < st.samples_read);
  CHECK(st.samples_done + st.samples_abandoned == st.samples_read);
  CHECK(be.submits == be.collects);  // the step in flight at the stop was collected
}

TEST_CASE("prefix sharing of a partial match: the first context frame only") {
  // b's first context frame equals a's, its second does not: b shares a's first three blocks
  // (12 of the frame's 13 slots) and writes the rest of its prompt itself. (It once waited for
  // the blocks it was to write itself, forever.)
  ModelSpec sp = loom::test::tiny_frame_spec();
  Job a = make_job(sp, "a", 3, 4, 1, 0), b = a;
  b.id = "b";
  b.sampling.seed = 2;
  for (size_t i = size_t(sp.frame_slots()); i < b.prompt.size(); i++)
    if (b.prompt[i] >= 0) b.prompt[i] = (b.prompt[i] + 1) % 999;
  RunOut got = run_jobs({a, b}, 64, 400, true, 4);
  CHECK(got.frames.at({"a", 0}) == reference_frames(a, 0, sp));
  CHECK(got.frames.at({"b", 0}) == reference_frames(b, 0, sp));
  CHECK(got.stats.scheduler.shared_blocks == 3);
}

TEST_CASE("prefix sharing: identical context frames are computed once") {
  ModelSpec sp = loom::test::tiny_frame_spec();
  std::vector<Job> jobs;
  for (int i = 0; i < 8; i++)
    jobs.push_back(make_job(sp, "g" + std::to_string(i), 3, 2, 500 + i, 7));
  RunOut shared = run_jobs(jobs, 64, 400, true, 4);
  RunOut plain = run_jobs(jobs, 64, 400, false, 4);
  CHECK(shared.frames == plain.frames);
  // 39 prompt slots = 9 full blocks of 4; all but the block holding the last slot are shared
  // (the last slot's logits are needed): 7 of the other jobs take 9 blocks each.
  CHECK(shared.stats.scheduler.shared_blocks == 7 * 9);
  CHECK(shared.stats.scheduler.prefill_saved == 7 * 36);
  CHECK(plain.stats.scheduler.shared_blocks == 0);
  // KV reads counted once a step: without sharing every block has one reader; with it, a shared
  // block's extra readers drop out (4 slots each), and at least one step reads the 9 blocks for
  // all 8 jobs.
  const SchedulerStats &s = shared.stats.scheduler, &p = plain.stats.scheduler;
  CHECK(p.kv_reads_once == p.kv_reads);
  const int64_t saved = s.kv_reads - s.kv_reads_once;
  CHECK(saved % 4 == 0);
  CHECK(saved >= 7 * 36);
  CHECK(saved <= s.steps * 7 * 36);
}

TEST_CASE("KV cache: references, eviction order and hashes") {
  KvCache c(4, 16);
  const int a = c.allocate(), b = c.allocate();
  CHECK(a != b);
  CHECK(c.used_blocks() == 2);
  c.register_hash(a, 111);
  c.set_ready(a);
  CHECK(c.lookup(111) == a);
  c.add_ref(a);
  c.release(a);
  CHECK(c.ref_count(a) == 1);
  c.release(a);  // free but cached: still findable
  CHECK(c.lookup(111) == a);
  c.release(b);
  c.check_invariants();
  // Plain free blocks are reused before cached ones.
  const int x = c.allocate(), y = c.allocate(), z = c.allocate();
  CHECK(std::set<int>{x, y, z}.count(a) == 0);
  CHECK(c.lookup(111) == a);
  const int w = c.allocate();  // the last one left: the cached block is evicted
  CHECK(w == a);
  CHECK(c.lookup(111) == -1);
  CHECK_THROWS_WITH_AS(c.allocate(), "KV cache: out of blocks (4 in all)", Error);
  c.check_invariants();
  // A block released before it was written in full loses its hash.
  c.release(w);
  const int v = c.allocate();
  c.register_hash(v, 222);
  c.release(v);
  CHECK(c.lookup(222) == -1);
  CHECK_THROWS_AS(c.release(v), Error);
}

TEST_CASE("a job larger than the whole cache fails alone; the others finish") {
  ModelSpec sp = loom::test::tiny_frame_spec();
  FakeBackend be(sp);
  EngineOptions opt;
  opt.cache.block_size = 4;
  opt.cache.num_blocks = 12;  // 48 slots: a 3-frame prompt + 1 frame needs 52
  Engine engine(sp, be, opt);
  std::vector<Job> jobs = {make_job(sp, "small", 1, 2, 1, 0), make_job(sp, "big", 3, 1, 2, 0),
                           make_job(sp, "small2", 1, 1, 3, 0)};
  std::vector<JobResult> results;
  RunStats st =
      engine.run(loom::test::source_of(jobs), [&](const JobResult& r) { results.push_back(r); });
  REQUIRE(results.size() == 3);
  int errors = 0;
  for (const JobResult& r : results)
    if (!r.ok) {
      errors++;
      CHECK(r.id == "big");
      CHECK(r.error.find("job needs 13 KV blocks of 4 slots for one round, the cache holds 12") !=
            std::string::npos);
      // The pool is a fixed count (--kv-blocks): that is the option to raise, not a memory share.
      CHECK(r.error.find("; raise --kv-blocks or shorten the job") != std::string::npos);
    }
  CHECK(errors == 1);
  CHECK(st.jobs_failed == 1);
}

TEST_CASE("the pool is asked for with the largest step the scheduler may form") {
  // The CUDA backend allocates that step's activations before the pool takes what is left
  // (--gpu-memory-fraction bounds both), instead of growing them mid-run into the reserve.
  ModelSpec sp = loom::test::tiny_frame_spec();
  FakeBackend be(sp);
  EngineOptions opt;
  opt.scheduler.max_seqs = 3;
  opt.scheduler.max_batch_slots = 50;
  opt.cache.block_size = 4;
  opt.cache.num_blocks = 40;
  Engine engine(sp, be, opt);
  engine.run(loom::test::source_of({make_job(sp, "a", 1, 1, 1, 0)}),
             [](const JobResult& r) { REQUIRE(r.ok); });
  CHECK(be.request.step_slots == 50);
  CHECK(be.request.step_seqs == 3);
  CHECK(be.request.num_blocks == 40);
  CHECK(be.request.block_size == 4);
}

TEST_CASE("frame times: exact statistics, percentiles from a bounded sample") {
  FrameTimes small;
  for (int i = 1; i <= 101; i++) small.add(double(i));
  CHECK(small.count() == 101);
  CHECK(small.mean() == doctest::Approx(51.0));
  CHECK(small.percentile(0.5) == 51.0);  // exact below the sample's capacity
  CHECK(small.percentile(0.9) == 91.0);
  CHECK(small.max() == 101.0);
  FrameTimes big;  // a million frames: count, mean and max stay exact, the median close
  const int n = 1000000;
  for (int64_t i = 0; i < n; i++) big.add(double((i * 7919) % n));  // a permutation of 0..n-1
  CHECK(big.count() == n);
  CHECK(big.mean() == doctest::Approx((n - 1) / 2.0));
  CHECK(big.max() == double(n - 1));
  CHECK(big.percentile(0.5) == doctest::Approx(n / 2.0).epsilon(0.02));
  CHECK(big.percentile(0.9) == doctest::Approx(0.9 * n).epsilon(0.02));
}
