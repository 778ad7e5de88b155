// The FP8 KV cache on the CPU side (README "FP8 KV cache"): the e4m3 host reference checked
// exhaustively over every bf16 bit pattern against a brute-force nearest-value search, the
// scales file, the CPU backend's FP8 round trip, and `loom calibrate` / `run --kv-dtype fp8`
// through the CLI with their errors.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cmath>
#include <functional>
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
  const std::string head = R"({"format": "loom-kv-scales", "version": 1, "dtype": "float8_e4m3fn",
      "layers": 2, "kv_heads": 3, )";
  std::ofstream(path) << head << R"("granularity": "layer", "k": [0.5, 2], "v": [1, 3]})";
  const KvScales p = read_kv_scales(path, 2, 3);
  CHECK(p.k == std::vector<float>{0.5f, 0.5f, 0.5f, 2, 2, 2});
  CHECK(p.v == std::vector<float>{1, 1, 1, 3, 3, 3});

  auto err = [&](const std::string& text, int layers = 2) {
    std::ofstream(path) << text;
    try {
      read_kv_scales(path, layers, 3);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  const std::string at = "--kv-scales " + path + ": ";
  const std::string layer = head + R"("granularity": "layer", )";
  CHECK(err(layer + R"("k": [1, 1], "v": [1, 1]})", 4) ==
        at + "scales for 2 layers x 3 kv heads; the model has 4 x 3");
  CHECK(err(layer + R"("k": [1, -1], "v": [1, 1]})").find("\"k\"[1]: scale -1") !=
        std::string::npos);
  CHECK(err(head + R"("granularity": "head", "k": [[1, 1, 1], [1, 2]], "v": [1, 1]})") ==
        at + "\"k\"[1] has 2 scales; the model has 3 kv heads");
  CHECK(err(layer + R"("k": [1, 1]})") ==
        at + "missing key \"v\": a scales file has format, version, dtype, granularity, layers, "
             "kv_heads, k and v (loom calibrate writes them)");
  CHECK(err(R"({"format": "other"})") ==
        at + "expected \"format\": \"loom-kv-scales\" (a file from loom calibrate), found "
             "\"other\"");
  CHECK(err("[1, 2]") == at + "expected a JSON object (a file from loom calibrate), found an "
                              "array of 2");
  // Invalid JSON says so, with the parser's reason (NaN is no JSON number).
  const std::string nan = err(layer + R"("k": [1, NaN], "v": [1, 1]})");
  CHECK(nan.find(": not valid JSON: parse error at line 2, column ") != std::string::npos);
  CHECK(nan.find("[json.exception") == std::string::npos);
  CHECK(err("[1, 2").find(": not valid JSON: parse error") != std::string::npos);
  CHECK(err(layer + R"("k": [1, 1e400], "v": [1, 1]})") ==
        at + "not valid JSON: number overflow parsing '1e400'");
  // A finite scale fp32 cannot use: 448 s overflows (1e300 is not even a float), or 1/s does.
  for (const std::string bad : {"1e+300", "1e+36", "7.591e+35", "2.939e-39"}) {
    CAPTURE(bad);
    CHECK(err(layer + R"("k": [1, 1], "v": [)" + bad + R"(, 1]})") ==
          at + "\"v\"[0]: scale " + bad +
              ": expected a number in [2.94e-39, 7.59e+35] (1/s and 448 s must be finite in "
              "fp32)");
  }
  // The bounds the message prints are the ones the check takes, and fp32 can use them.
  CHECK(err(layer + R"("k": [1, 1], "v": [7.59e35, 2.94e-39]})") == "(no error)");
  CHECK(std::isfinite(1.0f / float(kMinKvScale)));
  CHECK(std::isfinite(kFp8E4m3Max * float(kMaxKvScale)));
}

TEST_CASE("calibrate's scale of a head: absmax · margin / 448, never below what run accepts") {
  CHECK(kv_scale_for(448.0f, 1.25) == 1.25f);
  CHECK(kv_scale_for(0.0f, 1.25) == 1.0f);  // zeros only: any scale is exact
  // A head whose values all stayed under ~1e-36: absmax · margin / 448 is below kMinKvScale,
  // which run refused (the file calibrate wrote did not load).
  const float tiny = kv_scale_for(1e-38f, 1.25);
  CHECK(double(tiny) >= kMinKvScale);
  CHECK(double(tiny) < 1.0001 * kMinKvScale);
  const std::string dir = cli::temp_dir("kv_scales_tiny");
  KvScales s = KvScales::ones(1, 2);
  s.k[1] = tiny;
  { std::ofstream(dir + "/s.json") << kv_scales_json(s, {}).dump(2); }
  CHECK(read_kv_scales(dir + "/s.json", 1, 2).k[1] == tiny);
}

TEST_CASE("scales file: strict keys, types and shapes; each error names file, key and want") {
  const std::string dir = cli::temp_dir("kv_scales_strict");
  const std::string path = dir + "/scales.json";
  // A file as calibrate writes it (per head), then one key at a time changed.
  KvScales s = KvScales::ones(2, 3);
  s.v[1] = 0.5f;
  const cli::json good =
      cli::json::parse(kv_scales_json(s, {{"margin", 1.25},
                                          {"calibration", {{"fit_jobs", 3}}},
                                          {"absmax", {{"k", {1, 2}}, {"v", {3, 4}}}}})
                           .dump());
  auto err_text = [&](const std::string& text) {
    std::ofstream(path) << text;
    try {
      read_kv_scales(path, 2, 3);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  auto err = [&](const std::function<void(cli::json&)>& edit) {
    cli::json j = good;
    edit(j);
    return err_text(j.dump());
  };
  const std::string at = "--kv-scales " + path + ": ";
  CHECK(err([](cli::json&) {}) == "(no error)");
  CHECK(err([](cli::json& j) { j.erase("convention"); }) == "(no error)");  // optional
  // A key given twice is refused, at the top and inside calibrate's record.
  std::string text = good.dump(1);
  CHECK(err_text(text.substr(0, text.size() - 2) + ",\n \"k\": [1, 1]\n}") ==
        at + "key \"k\": expected each key once, found it a second time");
  const std::string twice_inside = good.dump();
  const size_t cal = twice_inside.find("\"fit_jobs\"");
  REQUIRE(cal != std::string::npos);
  CHECK(err_text(twice_inside.substr(0, cal) + "\"fit_jobs\": 1, " + twice_inside.substr(cal)) ==
        at + "key \"fit_jobs\" of \"calibration\": expected each key once, found it a second "
             "time");
  // Unknown keys (a misspelt "k", a key of another tool).
  for (const char* key : {"K", "kscale"}) {
    CAPTURE(key);
    CHECK(err([&](cli::json& j) { j[key] = j["k"]; }) ==
          at + "unknown key \"" + key +
              "\": expected one of \"format\", \"version\", \"dtype\", \"convention\", "
              "\"granularity\", \"layers\", \"kv_heads\", \"k\", \"v\", \"margin\", "
              "\"calibration\", \"absmax\"");
  }
  // Granularity against the arrays' shape.
  CHECK(err([](cli::json& j) { j["granularity"] = "layer"; }) ==
        at + "\"k\"[0]: expected a number (granularity \"layer\": one scale per layer), found an "
             "array of 3");
  CHECK(err([](cli::json& j) {
          j["k"] = {1, 1};
          j["v"] = {1, 1};
        }) == at + "\"k\"[0]: expected an array of 3 scales (granularity \"head\": one per kv "
                   "head), found 1");
  CHECK(err([](cli::json& j) { j["k"][1] = 0.5; }) ==
        at + "\"k\"[1]: expected an array of 3 scales (granularity \"head\": one per kv head), "
             "found 0.5");
  CHECK(err([](cli::json& j) {
          j["granularity"] = "layer";
          j["k"] = {1, {1, 1, 1}};
        }) == at + "\"k\"[1]: expected a number (granularity \"layer\": one scale per layer), "
                   "found an array of 3");
  CHECK(err([](cli::json& j) { j["granularity"] = "tensor"; }) ==
        at + "\"granularity\": expected \"layer\" or \"head\", found \"tensor\"");
  // The element type: e4m3 only.
  for (const char* dtype : {"float8_e5m2", "bfloat16"}) {
    CAPTURE(dtype);
    CHECK(err([&](cli::json& j) { j["dtype"] = dtype; }) ==
          at + "\"dtype\": expected \"float8_e4m3fn\" (loom's FP8 KV cache is e4m3), found \"" +
              dtype + "\"");
  }
  CHECK(err([](cli::json& j) {
          j["convention"] = "stored = x * s";
        }).find(at + "\"convention\": expected \"stored = e4m3(x * (1/s))") == 0);
  // Counts are integers; missing keys are named, not read as 0 or -1.
  CHECK(err([](cli::json& j) { j["layers"] = 3.5; }) ==
        at + "\"layers\": expected an integer (the model's 2), found 3.5");
  CHECK(err([](cli::json& j) { j["kv_heads"] = "3"; }) ==
        at + "\"kv_heads\": expected an integer (the model's 3), found \"3\"");
  CHECK(err([](cli::json& j) { j.erase("version"); }) ==
        at + "missing key \"version\": expected \"version\": 1 (this loom reads version 1)");
  CHECK(err([](cli::json& j) { j["version"] = 2; }) ==
        at + "\"version\": expected 1 (this loom reads version 1), found 2");
  CHECK(err([](cli::json& j) { j["version"] = "1"; }) ==
        at + "\"version\": expected the integer 1 (this loom reads version 1), found \"1\"");
  for (const char* key : {"layers", "kv_heads", "dtype", "granularity", "k"}) {
    CAPTURE(key);
    CHECK(err([&](cli::json& j) { j.erase(key); }) ==
          at + "missing key \"" + key +
              "\": a scales file has format, version, dtype, granularity, layers, kv_heads, k "
              "and v (loom calibrate writes them)");
  }
  // Wrong types name the key, not the JSON library's type_error.
  CHECK(err([](cli::json& j) { j["k"] = "x"; }) ==
        at + "\"k\": expected an array of 2 arrays of 3 scales (granularity \"head\": one per "
             "layer and kv head), found \"x\"");
  CHECK(err([](cli::json& j) { j["v"][0][2] = "1"; }) ==
        at + "\"v\"[0][2]: expected a number, found \"1\"");
  CHECK(err([](cli::json& j) { j["margin"] = "1.25"; }) ==
        at + "\"margin\": expected a number, found \"1.25\"");
  CHECK(err([](cli::json& j) { j["calibration"] = 3; }) ==
        at + "\"calibration\": expected an object, found 3");

  // The file itself: missing, a folder, too large (read no further than the cap).
  auto read_err = [&](const std::string& p) {
    try {
      read_kv_scales(p, 2, 3);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  CHECK(read_err(dir + "/none.json") == "--kv-scales " + dir +
                                            "/none.json: cannot open it: No such file or "
                                            "directory; expected a scales JSON file from loom "
                                            "calibrate");
  CHECK(read_err(dir) ==
        "--kv-scales " + dir + ": it is a folder; expected a scales JSON file from loom calibrate");
  CHECK(read_err("/dev/zero") ==
        "--kv-scales /dev/zero: more than 16 MiB; expected a scales JSON file from loom "
        "calibrate (a few KiB for most models)");
  // A pipe is read once, to its end: what a FIFO or `<(cat scales.json)` gives.
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const std::string bytes = good.dump();
  REQUIRE(::write(fds[1], bytes.data(), bytes.size()) == ssize_t(bytes.size()));
  ::close(fds[1]);
  const KvScales piped = read_kv_scales("/dev/fd/" + std::to_string(fds[0]), 2, 3);
  ::close(fds[0]);
  CHECK(piped.v == s.v);
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
  CHECK(rep["kv_cache"]["dtype"] == "fp8");
  CHECK(rep["kv_cache"]["scales"] == scales);
  CHECK(rep["run_identity"]["kv_scales"]["k"] == j["k"]);
  CHECK(cli::read_lines(dir + "/fp8.jsonl").size() == 5);  // 4 jobs, one of 2 samples

  // --kv-scales <(cat scales.json): a pipe, read once (a second read found it empty). The
  // scales recorded (side file) are the scales the run used: the same tokens as from the file.
  {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);  // no O_CLOEXEC: loom inherits the read end, as from bash
    const std::string bytes = cli::slurp(scales);
    REQUIRE(::write(fds[1], bytes.data(), bytes.size()) == ssize_t(bytes.size()));
    ::close(fds[1]);
    const std::string fd_path = "/dev/fd/" + std::to_string(fds[0]);
    e = cli::run("run --backend cpu --model " + model + " --jobs " + jobs + " --out " + dir +
                     "/piped.jsonl --kv-dtype fp8 --kv-scales " + fd_path + " -q",
                 dir);
    ::close(fds[0]);
    REQUIRE_MESSAGE(e.code == 0, e.err);
    const auto side = cli::json::parse(cli::slurp(dir + "/piped.jsonl.loom.json"));
    CHECK(side["identity"]["kv_scales"]["k"] == j["k"]);
    CHECK(side["identity"]["kv_scales"]["v"] == j["v"]);
    CHECK(side["provenance"]["dtype"]["kv_scales"] == fd_path);
    CHECK(cli::tokens_by_sample(dir + "/piped.jsonl") == cli::tokens_by_sample(dir + "/fp8.jsonl"));
  }

  // fp8 without scales warns once and runs with 1.0; --quiet keeps warnings, this one too.
  e = cli::run("run --backend cpu --model " + model + " --jobs " + jobs + " --out " + dir +
                   "/ones.jsonl --kv-dtype fp8 -q",
               dir);
  CHECK(e.code == 0);
  const std::string ones = "without --kv-scales: every K and V scale is 1.0";
  CHECK(e.err.find(ones) != std::string::npos);
  CHECK(e.err.find(ones) == e.err.rfind(ones));

  // Resuming with another KV format would mix outputs: refused, naming the KV dtype of each.
  e = cli::run("run --backend cpu --model " + model + " --jobs " + jobs + " --out " + dir +
                   "/fp8.jsonl --resume -q",
               dir);
  CHECK(e.code == 2);
  CHECK(e.err.find("was made with kv_dtype = \"fp8\", this run has kv_dtype = \"f32\" (") !=
        std::string::npos);
  e = cli::run(
      "run --backend cpu --model " + model + " --jobs " + jobs + " --out " + dir + "/f32.jsonl -q",
      dir);
  REQUIRE_MESSAGE(e.code == 0, e.err);
  e = cli::run("run --backend cpu --model " + model + " --jobs " + jobs + " --out " + dir +
                   "/f32.jsonl --resume -q --kv-dtype fp8 --kv-scales " + scales,
               dir);
  CHECK(e.code == 2);
  CHECK(e.err.find("was made with kv_dtype = \"f32\", this run has kv_dtype = \"fp8\" (") !=
        std::string::npos);

  // Errors: scales without fp8; a scales file for another shape; calibrating with fp8.
  e = cli::run("run --backend cpu --model " + model + " --jobs " + jobs + " --out " + dir +
                   "/x.jsonl --kv-scales " + scales,
               dir);
  CHECK(e.code == 2);
  CHECK(e.err.find("--kv-scales applies to an fp8 KV cache; expected --kv-dtype fp8 with it") !=
        std::string::npos);
  std::ofstream(dir + "/bad.json") << R"({"format": "loom-kv-scales", "version": 1,
      "dtype": "float8_e4m3fn", "granularity": "layer", "layers": 7, "kv_heads": 1, "k": [1],
      "v": [1]})";
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
