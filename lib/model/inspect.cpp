#include "model/inspect.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <utility>

namespace loom {

namespace {

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

std::string gigabytes(size_t bytes) {
  if (bytes < 10'000'000) return fixed(double(bytes) / 1e6, 3) + " MB";
  return fixed(double(bytes) / 1e9, 2) + " GB";
}

// 2.04 B, 406.8 K, 12.3 M: parameter counts at a glance.
std::string short_count(int64_t n) {
  if (n >= 1'000'000'000) return fixed(double(n) / 1e9, 2) + " B";
  if (n >= 1'000'000) return fixed(double(n) / 1e6, 1) + " M";
  return fixed(double(n) / 1e3, 1) + " K";
}

std::string pad(const std::string& s, size_t w) {
  // Width counts bytes; our labels are ASCII except "×", padded by its display width.
  size_t shown = 0;
  for (unsigned char c : s) shown += (c & 0xc0) != 0x80;
  return shown >= w ? s + " " : s + std::string(w - shown, ' ');
}

std::string short_float(float v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

const char* projection_name(ActionProjection p) {
  switch (p) {
    case ActionProjection::None:
      return "none";
    case ActionProjection::Linear:
      return "linear";
    case ActionProjection::Mlp:
      return "mlp";
    case ActionProjection::Tokens:
      return "tokens";
  }
  return "?";
}

// Label/value pairs printed two to a line.
void grid(std::ostringstream& os, const std::vector<std::pair<std::string, std::string>>& kv) {
  for (size_t i = 0; i < kv.size(); i += 2) {
    std::string line = "  " + pad(kv[i].first, 18) + pad(kv[i].second, 16);
    if (i + 1 < kv.size()) line += pad(kv[i + 1].first, 18) + kv[i + 1].second;
    while (!line.empty() && line.back() == ' ') line.pop_back();
    os << line << "\n";
  }
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); i++) s += (i ? sep : "") + v[i];
  return s;
}

}  // namespace

std::string group_thousands(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (size_t i = 0; i < digits.size(); i++) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

// One line of the spec's feature fields, e.g. "norm layer (bias), mlp plain gelu_tanh, …".
static std::string features_line(const ModelSpec& s) {
  static const char* const kAct[] = {"silu", "gelu_tanh", "gelu", "relu"};
  static const char* const kPos[] = {"none", "absolute", "spatio_temporal"};
  std::string out = s.norm == NormKind::Rms ? "norm rms" : "norm layer";
  if (!s.norm_affine) out += " (no affine)";
  if (s.norm_bias) out += " (bias)";
  out +=
      std::string(", mlp ") + (s.mlp == MlpKind::SwiGlu ? "swiglu " : "plain ") + kAct[int(s.act)];
  std::string biases;
  if (s.qkv_bias) biases += " qkv";
  if (s.o_bias) biases += " o";
  if (s.mlp_bias) biases += " mlp";
  out += ", biases" + (biases.empty() ? std::string(" none") : biases);
  out += s.rotary ? ", rotary" : ", no rotary";
  out += std::string(", positions ") + kPos[int(s.positions)];
  if (s.position_offset) out += " +" + std::to_string(s.position_offset);
  if (s.logit_end > 0)
    out +=
        ", image ids [" + std::to_string(s.logit_begin) + ", " + std::to_string(s.logit_end) + ")";
  return out;
}

std::string eos_ids_text(const ModelSpec& s) {
  std::string out = std::to_string(s.eos_id);
  for (int id : s.more_eos) out += ", " + std::to_string(id);
  return out;
}

// A float as the shortest decimal that reads back as it (1e-06, not 9.999999974752427e-07).
static double shortest(float v) {
  char buf[32];
  for (int digits = 1; digits <= 9; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, double(v));
    if (std::strtof(buf, nullptr) == v) break;
  }
  return std::strtod(buf, nullptr);
}

std::string describe_model(const LoadedModel& m) {
  const ModelSpec& s = m.spec;
  std::ostringstream os;
  const auto& files = m.checkpoint->files();
  os << "model         " << m.checkpoint->dir() << "\n";
  os << "architecture  " << s.architecture << "\n";
  os << "table         " << m.table_path << "\n";
  os << "files         " << files.size() << (files.size() == 1 ? " file, " : " shards, ")
     << gigabytes(size_t(m.checkpoint->total_file_bytes())) << ", " << m.checkpoint->names().size()
     << " tensors\n";
  os << "dtype         " << dtype_name(m.dtype) << "\n\n";

  os << "spec\n";
  grid(os, {{"hidden", std::to_string(s.hidden)},
            {"vocab", std::to_string(s.vocab)},
            {"layers", std::to_string(s.layers)},
            {"max_positions", std::to_string(s.max_positions)},
            {"heads", std::to_string(s.heads)},
            {s.norm == NormKind::Rms ? "rms_eps" : "ln_eps", short_float(s.rms_eps)},
            {"kv_heads", std::to_string(s.kv_heads)},
            {"rope_theta", s.rotary ? short_float(s.rope_theta) : "(no rotary)"},
            {"head_dim", std::to_string(s.head_dim)},
            {"tied_lm_head", s.tied_lm_head ? "true" : "false"},
            {"intermediate", std::to_string(s.intermediate)},
            {"bos_id / eos_id", std::to_string(s.bos_id) + " / " + eos_ids_text(s)}});
  os << "features      " << features_line(s) << "\n";
  if (s.has_frames()) {
    os << "frame layout\n";
    std::string proj = projection_name(s.action_projection);
    if (s.action_projection == ActionProjection::Mlp)
      proj += " (" + std::to_string(s.action_mlp_layers) + " layers, ReLU between)";
    grid(os, {{"image_tokens (P)", std::to_string(s.image_tokens)},
              {"spatial_rows", std::to_string(s.spatial_rows) + " (S = P + A)"},
              {"action_tokens (A)", std::to_string(s.action_tokens)},
              {"temporal_rows (T)", std::to_string(s.temporal_rows)},
              {"action_dim", std::to_string(s.action_dim)},
              {"action_projection", proj}});
  } else {
    os << "frame layout  none (plain token generation)\n";
  }

  os << "\nweights\n";
  size_t role_w = 18;  // past the longest role ("layer.attn_norm_bias")
  for (const Binding& b : m.bindings) role_w = std::max(role_w, b.role.size() + 2);
  os << "  " << pad("role", role_w) << pad("count", 7) << pad("shape", 17) << pad("dtype", 7)
     << "source\n";
  for (size_t i = 0; i < m.bindings.size();) {
    const Binding& b = m.bindings[i];
    size_t j = i + 1;
    while (j < m.bindings.size() && b.layer >= 0 && m.bindings[j].role == b.role) j++;
    const std::string count = b.layer >= 0 ? "×" + std::to_string(j - i) : "";
    std::string source = join(b.layer >= 0 ? b.templates : b.hf_names, " + ");
    if (b.bytes == 0)
      source = "= " + b.note.substr(b.note.find("tied to ") + 8) + " (tied)";
    else if (!b.note.empty())
      source += "  (" + b.note + ")";
    os << "  " << pad(b.role, role_w) << pad(count, 7) << pad(shape_str(b.shape), 17)
       << pad(dtype_name(b.dtype), 7) << source << "\n";
    i = j;
  }

  os << "\n";
  os << "parameters             " << group_thousands(m.parameters) << "  ("
     << short_count(m.parameters) << ")\n";
  os << "weight bytes           " << gigabytes(m.bytes) << "  (" << dtype_name(m.dtype) << ")\n";
  os << "read per decode step   " << gigabytes(m.step_bytes)
     << (s.tied_lm_head ? "  (every weight: the embedding table is also lm_head)\n"
                        : "  (every weight but the embedding table)\n");
  if (!m.warnings.empty()) {
    os << "\nwarnings (" << m.warnings.size() << ")\n";
    for (const std::string& w : m.warnings) os << "  " << w << "\n";
  }
  if (!m.notes.empty()) {
    os << "\nnotes (" << m.notes.size() << ")\n";
    for (const std::string& n : m.notes) os << "  " << n << "\n";
  }
  return os.str();
}

nlohmann::ordered_json describe_model_json(const LoadedModel& m) {
  using nlohmann::ordered_json;
  const ModelSpec& s = m.spec;
  ordered_json spec = {{"hidden", s.hidden},
                       {"layers", s.layers},
                       {"heads", s.heads},
                       {"kv_heads", s.kv_heads},
                       {"head_dim", s.head_dim},
                       {"intermediate", s.intermediate},
                       {"vocab", s.vocab},
                       {"max_positions", s.max_positions},
                       {"rms_eps", shortest(s.rms_eps)},
                       {"rope_theta", shortest(s.rope_theta)},
                       {"tied_lm_head", s.tied_lm_head},
                       {"bos_id", s.bos_id},
                       {"eos_id", s.eos_id},
                       {"more_eos", s.more_eos},
                       {"image_tokens", s.image_tokens},
                       {"action_tokens", s.action_tokens},
                       {"action_dim", s.action_dim},
                       {"spatial_rows", s.spatial_rows},
                       {"temporal_rows", s.temporal_rows},
                       {"action_projection", projection_name(s.action_projection)},
                       {"action_mlp_layers", s.action_mlp_layers}};
  ordered_json roles = ordered_json::array();
  for (size_t i = 0; i < m.bindings.size();) {  // per-layer roles once, as in the text view
    const Binding& b = m.bindings[i];
    size_t j = i + 1;
    while (j < m.bindings.size() && b.layer >= 0 && m.bindings[j].role == b.role) j++;
    roles.push_back({{"role", b.role},
                     {"layers", b.layer >= 0 ? ordered_json(j - i) : ordered_json()},
                     {"shape", b.shape},
                     {"dtype", dtype_name(b.dtype)},
                     {"source", b.layer >= 0 ? b.templates : b.hf_names},
                     {"note", b.note},
                     {"bytes", b.bytes * (j - i)}});
    i = j;
  }
  return {{"model", m.checkpoint->dir()},
          {"architecture", s.architecture},
          {"table", m.table_path},
          {"files", m.checkpoint->files().size()},
          {"file_bytes", m.checkpoint->total_file_bytes()},
          {"tensors", m.checkpoint->names().size()},
          {"dtype", dtype_name(m.dtype)},
          {"spec", spec},
          {"roles", roles},
          {"parameters", m.parameters},
          {"bytes", m.bytes},
          {"step_bytes", m.step_bytes},
          {"warnings", m.warnings},
          {"notes", m.notes}};
}

}  // namespace loom
