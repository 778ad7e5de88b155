#include "model/roles.h"

#include <cctype>

#include "core/error.h"

namespace loom {

namespace {

using Shape = std::vector<int64_t>;
using S = const ModelSpec&;

bool always(S, int) {
  return true;
}
bool affine(S s, int) {
  return s.norm_affine;
}
bool norm_bias(S s, int) {
  return s.norm == NormKind::Layer && s.norm_bias;
}
bool swiglu(S s, int) {
  return s.mlp == MlpKind::SwiGlu;
}
bool plain(S s, int) {
  return s.mlp == MlpKind::Plain;
}
bool action_layer(S s, int j) {
  return j < s.action_layers();
}

Shape hidden(S s, int) {
  return {s.hidden};
}
Shape vocab_hidden(S s, int) {
  return {s.vocab, s.hidden};
}

}  // namespace

const std::vector<RoleDef>& role_defs() {
  static const std::vector<RoleDef> defs = {
      {"embed", false, "always", always, vocab_hidden, Slot::Embed, DeviceDType::Compute},
      {"final_norm", false, "norm_affine", affine, hidden, Slot::FinalNorm, DeviceDType::F32},
      {"final_norm_bias", false, "norm \"layer\" with norm_bias", norm_bias, hidden,
       Slot::FinalNormBias, DeviceDType::F32},
      {"lm_head", false, "always", always, vocab_hidden, Slot::LmHead, DeviceDType::Compute},
      {"pos.absolute", false, "learned_positions \"absolute\"",
       [](S s, int) { return s.positions == PositionKind::Absolute; },
       [](S s, int) -> Shape {
         return {int64_t(s.max_positions) + s.position_offset, s.hidden};
       },
       Slot::PosAbsolute, DeviceDType::F32},
      {"pos.spatial", false, "learned_positions \"spatio_temporal\"",
       [](S s, int) { return s.positions == PositionKind::SpatioTemporal; },
       [](S s, int) -> Shape {
         return {s.spatial_rows, s.hidden};
       },
       Slot::PosSpatial, DeviceDType::F32},
      {"pos.temporal", false, "learned_positions \"spatio_temporal\"",
       [](S s, int) { return s.positions == PositionKind::SpatioTemporal; },
       [](S s, int) -> Shape {
         return {s.temporal_rows, s.hidden};
       },
       Slot::PosTemporal, DeviceDType::F32},
      {"layer.attn_norm", true, "norm_affine", affine, hidden, Slot::AttnNorm, DeviceDType::F32},
      {"layer.attn_norm_bias", true, "norm \"layer\" with norm_bias", norm_bias, hidden,
       Slot::AttnNormBias, DeviceDType::F32},
      {"layer.qkv", true, "always", always,
       [](S s, int) -> Shape {
         return {s.q_dim() + 2 * s.kv_dim(), s.hidden};
       },
       Slot::Qkv, DeviceDType::Compute},
      {"layer.qkv_bias", true, "qkv_bias", [](S s, int) { return s.qkv_bias; },
       [](S s, int) -> Shape { return {s.q_dim() + 2 * s.kv_dim()}; }, Slot::QkvBias,
       DeviceDType::F32},
      {"layer.o", true, "always", always,
       [](S s, int) -> Shape {
         return {s.hidden, s.q_dim()};
       },
       Slot::O, DeviceDType::Compute},
      {"layer.o_bias", true, "o_bias", [](S s, int) { return s.o_bias; }, hidden, Slot::OBias,
       DeviceDType::F32},
      {"layer.mlp_norm", true, "norm_affine", affine, hidden, Slot::MlpNorm, DeviceDType::F32},
      {"layer.mlp_norm_bias", true, "norm \"layer\" with norm_bias", norm_bias, hidden,
       Slot::MlpNormBias, DeviceDType::F32},
      {"layer.gate_up", true, "mlp \"swiglu\"", swiglu,
       [](S s, int) -> Shape {
         return {2 * int64_t(s.intermediate), s.hidden};
       },
       Slot::GateUp, DeviceDType::Compute},
      {"layer.gate_up_bias", true, "mlp \"swiglu\" with mlp_bias",
       [](S s, int j) { return swiglu(s, j) && s.mlp_bias; },
       [](S s, int) -> Shape { return {2 * int64_t(s.intermediate)}; }, Slot::GateUpBias,
       DeviceDType::F32},
      {"layer.up", true, "mlp \"plain\"", plain,
       [](S s, int) -> Shape {
         return {s.intermediate, s.hidden};
       },
       Slot::Up, DeviceDType::Compute},
      {"layer.up_bias", true, "mlp \"plain\" with mlp_bias",
       [](S s, int j) { return plain(s, j) && s.mlp_bias; },
       [](S s, int) -> Shape { return {s.intermediate}; }, Slot::UpBias, DeviceDType::F32},
      {"layer.down", true, "always", always,
       [](S s, int) -> Shape {
         return {s.hidden, s.intermediate};
       },
       Slot::Down, DeviceDType::Compute},
      {"layer.down_bias", true, "mlp_bias", [](S s, int) { return s.mlp_bias; }, hidden,
       Slot::DownBias, DeviceDType::F32},
      {"action.{j}.weight", false, "action_projection \"linear\" or \"mlp\"", action_layer,
       [](S s, int j) -> Shape {
         return {s.hidden, j == 0 ? s.action_dim : s.hidden};
       },
       Slot::ActionWeight, DeviceDType::FirstF32},
      {"action.{j}.bias", false, "action_projection \"linear\" or \"mlp\"", action_layer, hidden,
       Slot::ActionBias, DeviceDType::F32},
  };
  return defs;
}

const RoleDef* find_role(const std::string& role, int* j) {
  for (const RoleDef& d : role_defs()) {
    const std::string name = d.name;
    const size_t brace = name.find("{j}");
    if (brace == std::string::npos) {
      if (role == name) {
        if (j) *j = 0;
        return &d;
      }
      continue;
    }
    // "action.{j}.weight": prefix, 1–3 digits, suffix.
    const std::string prefix = name.substr(0, brace), suffix = name.substr(brace + 3);
    if (role.size() <= prefix.size() + suffix.size() || role.compare(0, prefix.size(), prefix) ||
        role.compare(role.size() - suffix.size(), suffix.size(), suffix))
      continue;
    const std::string digits =
        role.substr(prefix.size(), role.size() - prefix.size() - suffix.size());
    if (digits.size() > 3 || (digits.size() > 1 && digits[0] == '0')) continue;
    bool ok = true;
    for (char c : digits) ok &= std::isdigit(static_cast<unsigned char>(c)) != 0;
    if (!ok) continue;
    if (j) *j = std::stoi(digits);
    return &d;
  }
  return nullptr;
}

std::vector<std::string> needed_roles(const ModelSpec& s) {
  std::vector<std::string> out;
  for (const RoleDef& d : role_defs()) {
    const std::string name = d.name;
    const size_t brace = name.find("{j}");
    if (brace == std::string::npos) {
      if (d.needed(s, 0)) out.push_back(name);
      continue;
    }
    for (int j = 0; d.needed(s, j); j++)
      out.push_back(name.substr(0, brace) + std::to_string(j) + name.substr(brace + 3));
  }
  return out;
}

void check_weights(const ModelSpec& s, const Weights& w, const char* who) {
  LOOM_CHECK(int(w.layers.size()) == s.layers && int(w.action.size()) == s.action_layers(), who,
             ": weights hold ", w.layers.size(), " layers and ", w.action.size(),
             " action layers; the spec has ", s.layers, " and ", s.action_layers());
  Weights& mw = const_cast<Weights&>(w);  // slot() serves the loader too; only read here
  for (const std::string& role : needed_roles(s)) {
    int j = 0;
    const RoleDef* d = find_role(role, &j);
    for (int l = 0; l < (d->per_layer ? s.layers : 1); l++) {
      const Tensor* t = d->slot(mw, d->per_layer ? l : -1, j);
      const std::string what = d->per_layer ? cat(role, " of layer ", l) : role;
      LOOM_CHECK(!t->empty(), who, ": weight ", what, " is missing; the spec's features need it (",
                 d->when, ")");
      LOOM_CHECK(t->shape == d->shape(s, j), who, ": weight ", what, ": expected ",
                 shape_str(d->shape(s, j)), ", found ", shape_str(t->shape));
    }
  }
}

std::string role_names() {
  std::string out;
  for (const RoleDef& d : role_defs()) out += (out.empty() ? "" : ", ") + std::string(d.name);
  return out;
}

}  // namespace loom
