// Progress lines, the jobs file pre-count and the job error summary (progress.h).
#include "app/progress.h"

#include <simdjson.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "app/log.h"
#include "io/job_lines.h"
#include "io/jobs.h"

namespace loom {
namespace {

// Lines a log gets before the first interval: the run shows it is alive within seconds.
constexpr double kFirstLine_s = 2.0;
constexpr double kLiveRefresh_s = 0.2;

// num_samples and num_frames × num_samples of one job line, as the pre-count sees it: a field
// it cannot read counts as its default (1 sample, 0 frames); the job's own validation decides
// later, and a job that fails leaves the totals then (JobCounter::forget).
void count_line(simdjson::ondemand::parser& parser, std::string& text, uint32_t& samples,
                uint32_t& frames) {
  samples = 1;
  frames = 0;
  int64_t num_samples = 1, num_frames = 0;
  text.reserve(text.size() + simdjson::SIMDJSON_PADDING);
  simdjson::ondemand::document doc;
  simdjson::ondemand::object obj;
  if (parser.iterate(simdjson::padded_string_view(text.data(), text.size(), text.capacity()))
          .get(doc) ||
      doc.get_object().get(obj))
    return;
  for (auto field : obj) {  // values not asked for are skipped, not parsed
    std::string_view key;
    if (field.unescaped_key().get(key)) break;
    int64_t v = 0;
    if (key == "num_samples" && !field.value().get_int64().get(v) && v >= 1 && v <= 1 << 20)
      num_samples = v;
    if (key == "num_frames" && !field.value().get_int64().get(v) && v >= 0 && v <= kMaxJobFrames)
      num_frames = v;
  }
  samples = uint32_t(num_samples);
  frames = uint32_t(std::min<int64_t>(num_frames * num_samples, UINT32_MAX));
}

std::string duration_text(double s) {
  const long t = std::lround(std::max(0.0, s));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
  return buf;
}

// "12/40", or "12/>=40" while the total may still grow (a stream, or the pre-count running).
std::string of_total(int64_t done, int64_t total, bool final) {
  return std::to_string(done) + (final ? "/" : "/>=") + std::to_string(total);
}

}  // namespace

JobCounter::JobCounter(const std::string& path, int shard_index, int shard_count) {
  struct stat sb {};
  if (path == "-" || ::stat(path.c_str(), &sb) != 0 || !S_ISREG(sb.st_mode)) return;
  totals_.counting = true;
  thread_ = std::thread(&JobCounter::count, this, path, shard_index, shard_count);
}

JobCounter::~JobCounter() {
  cancel_ = true;
  if (thread_.joinable()) thread_.join();
}

JobCounter::Totals JobCounter::totals() const {
  std::lock_guard<std::mutex> lock(mu_);
  return totals_;
}

void JobCounter::forget(int64_t line) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!totals_.counting || line < 1) return;
  if (line > int64_t(lines_.size())) {
    forget_pending_.insert(line);
    return;
  }
  Line& l = lines_[size_t(line - 1)];
  totals_.samples -= l.samples;
  totals_.frames -= l.frames;
  l = Line{};
}

// The same lines, in the same way, as JobReader::next reads them: physical lines, blank ones
// skipped, the j-th non-blank line belongs to shard j mod count.
void JobCounter::count(std::string path, int shard_index, int shard_count) {
  try {
    std::ifstream in(path, std::ios::binary);
    if (!in) return;
    simdjson::ondemand::parser parser;
    std::vector<char> chunk(size_t(1) << 16);
    std::string text;
    bool too_long = false;
    uint64_t consumed = 0;
    int64_t line = 0, records = 0;
    while (!cancel_ &&
           read_job_line(in, path, chunk, kMaxJobLineBytes, text, too_long, consumed, &cancel_)) {
      ++line;
      trim_job_line(text, line);
      if (!too_long && text.find_first_not_of(" \t\r\f\v") == std::string::npos) continue;
      if (records++ % shard_count != shard_index) continue;
      Line l;
      if (!too_long) count_line(parser, text, l.samples, l.frames);
      std::lock_guard<std::mutex> lock(mu_);
      totals_.jobs++;
      if (forget_pending_.erase(line)) continue;
      lines_.resize(size_t(line));
      lines_.back() = l;
      totals_.samples += l.samples;
      totals_.frames += l.frames;
    }
    std::lock_guard<std::mutex> lock(mu_);
    totals_.done = !cancel_;
  } catch (const std::exception&) {
    // Unreadable: progress goes on with the totals of the jobs read, as for a stream.
    std::lock_guard<std::mutex> lock(mu_);
    totals_.counting = false;
  }
}

Progress::Progress(const JobCounter& counter, double interval_s, int tokens_per_frame)
    : counter_(counter),
      interval_(std::max(kMinProgressInterval_s, interval_s)),
      tokens_per_frame_(tokens_per_frame) {}

Progress::~Progress() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Progress::start() {
  thread_ = std::thread(&Progress::loop, this);
}

Progress::Counts Progress::counts_of(const RunStats& st) const {
  Counts c;
  c.jobs_read = st.jobs_read;
  c.jobs_failed = st.jobs_failed;
  c.samples_done = st.samples_done + st.samples_skipped;
  // Every frame is tokens_per_frame drawn tokens: frames of samples still running count too.
  c.frames = tokens_per_frame_ > 0 ? st.tokens / tokens_per_frame_ : st.frames;
  c.frames_done = c.frames + st.frames_skipped;
  c.samples_read = st.samples_read;
  c.frames_read = st.frames_read;
  c.tokens = st.tokens;
  c.wall_s = st.wall_s;
  return c;
}

void Progress::update(const RunStats& st) {
  std::lock_guard<std::mutex> lock(mu_);
  counts_ = counts_of(st);
}

void Progress::finish(const RunStats& st) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  print(counts_of(st), true);
  log_live_done();
}

void Progress::loop() {
  using Clock = std::chrono::steady_clock;
  const bool live = log_is_live();
  const auto t0 = Clock::now();
  auto at = [&](double s) {
    return t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  };
  double next = live ? kLiveRefresh_s : std::min(kFirstLine_s, interval_);
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (wake_.wait_until(lock, at(next), [&] { return stop_; })) break;
    const Counts c = counts_;
    const double since = std::chrono::duration<double>(Clock::now() - t0).count();
    lock.unlock();
    // The engine's clock stops between steps; a line in a long step shows the time so far.
    Counts shown = c;
    shown.wall_s = std::max(c.wall_s, since);
    print(shown, false);
    lock.lock();
    next += live ? kLiveRefresh_s : interval_;
    next = std::max(next, since);  // after a stall, no burst of lines to catch up
  }
}

void Progress::print(const Counts& c, bool last) {
  const JobCounter::Totals t = counter_.totals();
  // Totals: the pre-count when there is one; else (a stream) what was read so far, final at
  // the end. Never below what was read (a job read before the count reached its line).
  const bool final = t.counting ? t.done : last;
  const int64_t jobs = std::max(t.counting ? t.jobs : 0, c.jobs_read);
  const int64_t samples = std::max(t.counting ? t.samples : 0, c.samples_read);
  const int64_t frames = std::max(t.counting ? t.frames : 0, c.frames_read);
  const double tps = c.wall_s > 0 ? double(c.tokens) / c.wall_s : 0;
  const double fps = c.wall_s > 0 ? double(c.frames) / c.wall_s : 0;
  // The ETA follows frames (the work) for frame models, samples for plain ones.
  const bool by_frames = frames > 0;
  const double done = double(by_frames ? c.frames_done : c.samples_done);
  const double total = double(by_frames ? frames : samples);
  const double rate = by_frames ? fps : (c.wall_s > 0 ? double(c.samples_done) / c.wall_s : 0);
  double eta = -1;
  if (final && rate > 0) eta = std::max(0.0, total - done) / rate;
  char pct[32] = "";
  if (total > 0) std::snprintf(pct, sizeof pct, " (%.1f%%)", 100.0 * done / total);

  std::string frames_part =
      by_frames ? ", " + of_total(c.frames_done, frames, final) + " frames" : "";
  char rates[96];
  std::snprintf(rates, sizeof rates, "%.0f tokens/s, %.2f frames/s", tps, fps);
  const std::string eta_text = eta >= 0 ? duration_text(eta) : "?";
  if (log_is_live()) {
    // Most telling first: what does not fit the terminal's width is cut from the end.
    log_live("loom: " + of_total(c.samples_done, samples, final) + " samples" + frames_part + pct +
             ", ETA " + eta_text + ", " + std::to_string(c.jobs_failed) + " failed, " + rates);
    return;
  }
  nlohmann::ordered_json fields;
  fields["jobs_read"] = c.jobs_read;
  fields["jobs_total"] = jobs;
  fields["jobs_failed"] = c.jobs_failed;
  fields["samples_done"] = c.samples_done;
  fields["samples_total"] = samples;
  fields["frames_done"] = c.frames_done;
  fields["frames_total"] = frames;
  fields["totals_final"] = final;
  fields["tokens_per_s"] = tps;
  fields["frames_per_s"] = fps;
  fields["eta_s"] = eta >= 0 ? nlohmann::ordered_json(eta) : nlohmann::ordered_json();
  log_line(LogLevel::Progress,
           std::string(last ? "done: " : "progress: ") + of_total(c.jobs_read, jobs, final) +
               " jobs read, " + of_total(c.samples_done, samples, final) + " samples" +
               frames_part + pct + ", " + std::to_string(c.jobs_failed) + " failed; " + rates +
               (last ? "" : "; ETA " + eta_text),
           fields);
}

void JobErrorSummary::add(const std::string& message) {
  ++total_;
  std::string key = message;
  if (key.rfind("line ", 0) == 0) {  // "line 12: ..." → "..."
    const size_t colon = key.find(": ");
    if (colon != std::string::npos) key.erase(0, colon + 2);
  }
  std::string masked;
  for (char ch : key) {
    const bool digit = ch >= '0' && ch <= '9';
    const size_t n = masked.size();
    // A number's sign is part of it ("found -1" is the kind of "found 0").
    const bool sign =
        n > 0 && masked[n - 1] == '-' && (n == 1 || !std::isalnum((unsigned char)masked[n - 2]));
    if (!digit)
      masked += ch;
    else if (sign)
      masked.back() = '#';
    else if (masked.empty() || masked.back() != '#')
      masked += '#';
  }
  auto it = index_.find(masked);
  if (it != index_.end()) {
    kinds_[it->second].count++;
    return;
  }
  if (kinds_.size() >= kMaxKinds) {
    ++uncounted_;
    return;
  }
  index_.emplace(masked, kinds_.size());
  kinds_.push_back(Kind{message, 1});
}

std::vector<std::string> JobErrorSummary::lines(int64_t jobs_read, size_t shown) const {
  std::vector<std::string> out;
  if (total_ == 0) return out;
  const std::string kinds =
      std::to_string(kinds_.size()) + (uncounted_ > 0 ? "+" : "") +
      (kinds_.size() == 1 && uncounted_ == 0 ? " kind of error" : " kinds of error");
  out.push_back(std::to_string(total_) + " of " + std::to_string(jobs_read) + " jobs failed (" +
                kinds + ")" +
                (kinds_.size() > shown ? "; the first " + std::to_string(shown) + ":" : ":"));
  for (size_t i = 0; i < kinds_.size() && i < shown; i++)
    out.push_back("  " + std::to_string(kinds_[i].count) +
                  (kinds_[i].count == 1 ? " job:  " : " jobs: ") + kinds_[i].first);
  if (kinds_.size() > shown) {
    int64_t rest = uncounted_;
    for (size_t i = shown; i < kinds_.size(); i++) rest += kinds_[i].count;
    out.push_back("  ... " + std::to_string(kinds_.size() - shown) + " more kinds (" +
                  std::to_string(rest) + " jobs); every error is in its job's record");
  }
  return out;
}

}  // namespace loom
