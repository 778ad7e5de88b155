// The FP8 KV cache on the CPU side (README "FP8 KV cache"): the e4m3 host reference checked
// exhaustively over every bf16 bit pattern against a brute-force nearest-value search, the
// scales file, the CPU backend's FP8 round trip, and `loom calibrate` / `run --kv-dtype fp8`
// through the CLI with their errors.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "backend/cpu/cpu_backend.h"
#include "cli_util.h"
#include "core/dtype.h"
#include "core/fp8.h"
#include "engine/engine.h"
#include "golden.h"
#include "io/kv_scales.h"
#include "model/mapping.h"

using namespace loom;

namespace {

// The e4m3 code nearest to x by exhaustive search (ties: the even code), saturating at ±448;
// an independent definition to hold fp8_e4m3_from_f32 to.
uint8_t brute_force_e4m3(float x) {
  if (std::isnan(x)) return kFp8E4m3NaN;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  if (std::fabs(x) >= 448.0f) return uint8_t(sign | 0x7E);
  int best = 0;
  double best_d = std::numeric_limits<double>::infinity();
  for (int c = 0; c < 0x7F; c++) {  // magnitudes 0 .. 448 (0x7F is NaN)
    const double d = std::fabs(double(fp8_e4m3_to_f32(uint8_t(c))) - std::fabs(double(x)));
    if (d < best_d || (d == best_d && c % 2 == 0)) best = c, best_d = d;
  }
  return uint8_t(sign | best);
}

}  // namespace

TEST_CASE("e4m3 reference: every bf16 bit pattern rounds to the nearest code, ties to even") {
  int checked = 0;
  for (uint32_t h = 0; h < 65536; h++) {
    const float x = bf16_to_f32(uint16_t(h));
    const uint8_t got = fp8_e4m3_from_f32(x), want = brute_force_e4m3(x);
    if (std::isnan(x)) {
      CHECK(std::isnan(fp8_e4m3_to_f32(got)));
      continue;
    }
    if (got != want) {
      CAPTURE(h);
      CAPTURE(x);
      CHECK(int(got) == int(want));
    }
    checked++;
  }
  CHECK(checked == 65536 - 2 * 127);  // all but the NaN patterns
  // Fixed points: 1, the largest finite, saturation (inf too), the smallest subnormal, a tie
  // between subnormals 1 and 2 (to 2, even), a tie between 1 and 1.125 (to 1), −0.
  CHECK(fp8_e4m3_from_f32(1.0f) == 0x38);
  CHECK(fp8_e4m3_from_f32(448.0f) == 0x7E);
  CHECK(fp8_e4m3_from_f32(1e9f) == 0x7E);
  CHECK(fp8_e4m3_from_f32(-std::numeric_limits<float>::infinity()) == 0xFE);
  CHECK(fp8_e4m3_from_f32(0.001953125f) == 0x01);
  CHECK(fp8_e4m3_from_f32(0.0029296875f) == 0x02);
  CHECK(fp8_e4m3_from_f32(1.0625f) == 0x38);
  CHECK(fp8_e4m3_from_f32(1.1875f) == 0x3A);  // tie between 1.125 (0x39) and 1.25: even
  CHECK(fp8_e4m3_from_f32(-0.0f) == 0x80);
  CHECK(fp8_e4m3_from_f32(-0.0009f) == 0x80);  // below half the smallest subnormal: −0
  CHECK(fp8_e4m3_to_f32(0x7E) == 448.0f);
  CHECK(fp8_e4m3_to_f32(0x01) == 0.001953125f);
  CHECK(std::isnan(fp8_e4m3_to_f32(0xFF)));
  // Every code decodes and encodes back to itself.
  for (int c = 0; c < 256; c++)
    if ((c & 0x7F) != 0x7F) CHECK(int(fp8_e4m3_from_f32(fp8_e4m3_to_f32(uint8_t(c)))) == c);
}

TEST_CASE("KV round trip with a scale: x · (1/s) quantised, times s") {
  CHECK(kv_fp8_round_trip(3.0f, 0.5f) == 3.0f);        // 6 is a code
  CHECK(kv_fp8_round_trip(1000.0f, 2.0f) == 896.0f);   // saturates at 448 · 2
  CHECK(kv_fp8_round_trip(0.1f, 1.0f) == 0.1015625f);  // 13 · 2^-7
}

TEST_CASE("scales file: per layer or per head, checked against the model") {
  const std::string dir = cli::temp_dir("kv_scales");
  KvScales s = KvScales::ones(2, 3);
  s.k[4] = 0.25f;  // layer 1 head 1
  const std::string path = dir + "/scales.json";
  { std::ofstream(path) << kv_scales_json(s, {{"margin", 1.25}}).dump(2); }
  const KvScales r = read_kv_scales(path, 2, 3);
  CHECK(r.k == s.k);
  CHECK(r.v == s.v);
  CHECK(r.source == path);
  const auto j = cli::json::parse(cli::slurp(path));
  CHECK(j["granularity"] == "head");
  CHECK(j["margin"] == 1.25);

  // One number per layer applies to all its heads.
  std::ofstream(path) << R"({"format": "loom-kv-scales", "version": 1, "layers": 2,
      "kv_heads": 3, "k": [0.5, 2], "v": [1, [1, 2, 3]]})";
  const KvScales p = read_kv_scales(path, 2, 3);
  CHECK(p.k == std::vector<float>{0.5f, 0.5f, 0.5f, 2, 2, 2});
  CHECK(p.v == std::vector<float>{1, 1, 1, 1, 2, 3});

  auto err = [&](const std::string& text, int layers = 2) {
    std::ofstream(path) << text;
    try {
      read_kv_scales(path, layers, 3);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  const std::string head =
      R"({"format": "loom-kv-scales", "version": 1, "layers": 2, "kv_heads": 3, )";
  CHECK(err(head + R"("k": [1, 1], "v": [1, 1]})", 4).find("the model has 4 x 3") !=
        std::string::npos);
  CHECK(err(head + R"("k": [1, -1], "v": [1, 1]})").find("\"k\"[1]: scale -1") !=
        std::string::npos);
  CHECK(err(head + R"("k": [1, [1, 2]], "v": [1, 1]})").find("has 2 scales; the model has 3") !=
        std::string::npos);
  CHECK(err(head + R"("k": [1, 1]})").find("expected \"v\"") != std::string::npos);
  CHECK(err(R"({"format": "other"})").find("loom-kv-scales") != std::string::npos);
  CHECK(err("[1, 2]").find("not a JSON object") != std::string::npos);
  // Invalid JSON says so, with the parser's reason (NaN is no JSON number).
  const std::string nan = err(head + R"("k": [1, NaN], "v": [1, 1]})");
  CHECK(nan.find(": not valid JSON: parse error at line 1, column ") != std::string::npos);
  CHECK(nan.find("[json.exception") == std::string::npos);
  CHECK(err("[1, 2").find(": not valid JSON: parse error") != std::string::npos);
  CHECK(err(head + R"("k": [1, 1e400], "v": [1, 1]})") ==
        "--kv-scales " + path + ": not valid JSON: number overflow parsing '1e400'");
  // A finite scale fp32 cannot use: 448 s overflows (1e300 is not even a float).
  for (const std::string big : {"1e+300", "1e+36"}) {
    CAPTURE(big);
    CHECK(err(head + R"("k": [1, 1], "v": [)" + big + R"(, 1]})") ==
          path + ": \"v\"[0]: scale " + big +
              ": expected a number in [2.94e-39, 7.6e+35] (1/s and 448 s must be finite in fp32)");
  }
  CHECK(err(head + R"("k": [1, 1], "v": [7e35, 1e-38]})") == "(no error)");
}

namespace {

// Last-slot logits of the greedy golden case of tiny_v1 (draw 0: the prompt alone, so every
// KV format sees the same inputs), on the cpu backend with the given KV format.
std::vector<float> first_logits(KvDType kv, const KvScales& scales = {}) {
  const LoadedModel m = load_model(std::string(LOOM_TESTDATA) + "/tiny_v1");
  auto be = make_cpu_backend();
  be->load(m.spec, m.weights);
  const auto golden = test::read_json(std::string(LOOM_TESTDATA) + "/tiny_v1/golden.json");
  Job job;
  JobError err;
  REQUIRE(parse_job_line(golden["cases"][0]["job"].dump(), 1, m.spec, JobDefaults{}, job, err));
  EngineOptions opt;
  opt.cache.num_blocks = 64;
  opt.cache.kv_dtype = kv;
  opt.cache.kv_scales = scales;
  std::vector<float> out;
  opt.on_logits = [&](const Sequence& s, const float* l, int vocab) {
    if (s.draw_index() == 0 && out.empty()) out.assign(l, l + vocab);
  };
  Engine engine(m.spec, *be, opt);
  bool given = false;
  engine.run(
      [&](Job& j, JobError&, bool& ok) {
        if (given) return false;
        given = ok = true;
        j = job;
        return true;
      },
      [](const JobResult& r) { REQUIRE(r.ok); });
  return out;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); i++) d = std::max(d, std::fabs(double(a[i]) - b[i]));
  return d;
}

}  // namespace

TEST_CASE("cpu backend: an fp8 KV cache changes the logits within bounds; bf16 is refused") {
  const std::vector<float> f32 = first_logits(KvDType::Auto);
  const std::vector<float> fp8 = first_logits(KvDType::FP8);
  REQUIRE(f32.size() == fp8.size());
  const double d_fp8 = max_abs_diff(fp8, f32);
  MESSAGE("max |dlogit| fp8 KV (scales 1.0) vs f32 KV: ", d_fp8);
  CHECK(d_fp8 > 1e-3);
  CHECK(d_fp8 < 0.25);
  // A scale moves the rounding grid (e4m3's relative step is the same in every normal binade,
  // so the distance stays alike; the values change).
  const LoadedModel m = load_model(std::string(LOOM_TESTDATA) + "/tiny_v1");
  KvScales fine = KvScales::ones(m.spec.layers, m.spec.kv_heads);
  for (float& s : fine.k) s = 1.0f / 16;
  for (float& s : fine.v) s = 1.0f / 16;
  const std::vector<float> fp8_fine = first_logits(KvDType::FP8, fine);
  CHECK(max_abs_diff(fp8_fine, fp8) > 0);
  try {
    first_logits(KvDType::BF16);
    CHECK_MESSAGE(false, "bf16 KV on the cpu backend was accepted");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("the cpu backend computes in f32") != std::string::npos);
  }
}

TEST_CASE("loom calibrate writes scales that run --kv-dtype fp8 reads; the errors name the cause") {
  const std::string dir = cli::temp_dir("calibrate");
  const std::string model = cli::kData + "/tiny_v1", jobs = cli::kData + "/jobs/tiny_v1.jsonl";
  const std::string scales = dir + "/scales.json";
  cli::Exit e = cli::run(
      "calibrate --backend cpu --model " + model + " --jobs " + jobs + " --out " + scales, dir);
  REQUIRE_MESSAGE(e.code == 0, e.err);
  const auto j = cli::json::parse(cli::slurp(scales));
  CHECK(j["format"] == "loom-kv-scales");
  CHECK(j["calibration"]["fit_jobs"] == 3);
  CHECK(j["calibration"]["held_out_jobs"] == 1);
  CHECK(j["calibration"]["held_out_saturated"] == 0);
  const LoadedModel m = load_model(model);
  REQUIRE(j["k"].size() == size_t(m.spec.layers));
  // s = absmax · margin / 448, per (layer, kv head).
  for (int l = 0; l < m.spec.layers; l++)
    for (int h = 0; h < m.spec.kv_heads; h++) {
      const float absmax = j["absmax"]["k"][size_t(l * m.spec.kv_heads + h)].get<float>();
      CHECK(absmax > 0);
      const auto& k = j["k"][size_t(l)];
      const float s = k.is_array() ? k[size_t(h)].get<float>() : k.get<float>();
      CHECK(s == doctest::Approx(absmax * 1.25 / 448).epsilon(1e-6));
    }

  // The scales drive an fp8 run; the report's provenance says so.
  e = cli::run("run --backend cpu --model " + model + " --jobs " + jobs + " --out " + dir +
                   "/fp8.jsonl --report " + dir + "/fp8.report.json --kv-dtype fp8 --kv-scales " +
                   scales + " -q",
               dir);
  REQUIRE_MESSAGE(e.code == 0, e.err);
  const auto rep = cli::json::parse(cli::slurp(dir + "/fp8.report.json"));
  CHECK(rep["provenance"]["dtype"]["kv"] == "fp8");
  CHECK(rep["provenance"]["dtype"]["kv_scales"] == scales);
  CHECK(cli::read_lines(dir + "/fp8.jsonl").size() == 5);  // 4 jobs, one of 2 samples

  // fp8 without scales warns once and runs with 1.0.
  e = cli::run("run --backend cpu --model " + model + " --jobs " + jobs + " --out " + dir +
                   "/ones.jsonl --kv-dtype fp8",
               dir);
  CHECK(e.code == 0);
  CHECK(e.err.find("without --kv-scales: every K and V scale is 1.0") != std::string::npos);

  // Resuming with another KV format would mix outputs: refused, naming the key.
  e = cli::run("run --backend cpu --model " + model + " --jobs " + jobs + " --out " + dir +
                   "/fp8.jsonl --resume -q",
               dir);
  CHECK(e.code == 2);
  CHECK(e.err.find("kv_dtype") != std::string::npos);

  // Errors: scales without fp8; a scales file for another shape; calibrating with fp8.
  e = cli::run("run --backend cpu --model " + model + " --jobs " + jobs + " --out " + dir +
                   "/x.jsonl --kv-scales " + scales,
               dir);
  CHECK(e.code == 2);
  CHECK(e.err.find("--kv-scales applies to an fp8 KV cache; expected --kv-dtype fp8 with it") !=
        std::string::npos);
  std::ofstream(dir + "/bad.json") << R"({"format": "loom-kv-scales", "version": 1, "layers": 7,
      "kv_heads": 1, "k": [1], "v": [1]})";
  e = cli::run("run --backend cpu --model " + model + " --jobs " + jobs + " --out " + dir +
                   "/y.jsonl --kv-dtype fp8 --kv-scales " + dir + "/bad.json",
               dir);
  CHECK(e.code == 2);
  CHECK(e.err.find(dir + "/bad.json: scales for 7 layers x 1 kv heads; the model has") !=
        std::string::npos);
  e = cli::run("calibrate --backend cpu --model " + model + " --jobs " + jobs + " --out " + dir +
                   "/z.json --kv-dtype fp8",
               dir);
  CHECK(e.code == 2);
  CHECK(e.err.find("calibration measures K and V") != std::string::npos);
  CHECK(!cli::fs::exists(dir + "/z.json"));
  // No margin and half the jobs held out: the held-out rollouts pass the fitted maxima (13 of
  // 55,488 elements on tiny_v1 with draw stream 2), more than 1e-5: refused, nothing written.
  e = cli::run("calibrate --backend cpu --model " + model + " --jobs " + jobs + " --out " + dir +
                   "/tight.json --margin 1 --held-out-every 2",
               dir);
  CHECK(e.code == 2);
  CHECK(e.err.find("held-out run: 13 of 55488 K/V elements beyond 448 s") != std::string::npos);
  CHECK(e.err.find("(at most 1e-05 allowed); raise --margin or calibrate on more jobs") !=
        std::string::npos);
  CHECK(!cli::fs::exists(dir + "/tight.json"));
  // A bad job line costs itself only, as in `run`: the same scales, and a warning naming it.
  const std::string with_bad = dir + "/with_bad.jsonl";
  std::ofstream(with_bad) << cli::slurp(jobs) << "{\"id\": \"bad\", \"num_frames\": 0}\n";
  e = cli::run("calibrate --backend cpu --model " + model + " --jobs " + with_bad + " --out " +
                   dir + "/bad_line.json",
               dir);
  CHECK(e.code == 1);  // as run: the scales are written, the skipped line is said
  CHECK(e.err.find("calibrate: 1 line of " + with_bad +
                   " skipped, no valid job (the first: line 5") != std::string::npos);
  CHECK(e.err.find("); exit status 1") != std::string::npos);
  const auto again = cli::json::parse(cli::slurp(dir + "/bad_line.json"));
  CHECK(again["k"] == j["k"]);
  CHECK(again["v"] == j["v"]);
}
