#include "model/table.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/exe_dir.h"
#include "model/roles.h"

namespace loom {

// ---------------------------------------------------------------- spec field registry

namespace {

struct IntField {
  const char* name;
  int ModelSpec::*member;
};
struct FloatField {
  const char* name;
  float ModelSpec::*member;
};
struct BoolField {
  const char* name;
  bool ModelSpec::*member;
};

// action_mlp_layers and position_offset are set from "features", not from config.json, but
// shape expressions may use them like any other field.
const IntField kIntFields[] = {
    {"hidden", &ModelSpec::hidden},
    {"layers", &ModelSpec::layers},
    {"heads", &ModelSpec::heads},
    {"kv_heads", &ModelSpec::kv_heads},
    {"head_dim", &ModelSpec::head_dim},
    {"intermediate", &ModelSpec::intermediate},
    {"vocab", &ModelSpec::vocab},
    {"max_positions", &ModelSpec::max_positions},
    {"bos_id", &ModelSpec::bos_id},
    {"eos_id", &ModelSpec::eos_id},
    {"image_tokens", &ModelSpec::image_tokens},
    {"action_tokens", &ModelSpec::action_tokens},
    {"action_dim", &ModelSpec::action_dim},
    {"spatial_rows", &ModelSpec::spatial_rows},
    {"temporal_rows", &ModelSpec::temporal_rows},
    {"action_mlp_layers", &ModelSpec::action_mlp_layers},
    {"position_offset", &ModelSpec::position_offset},
    {"logit_begin", &ModelSpec::logit_begin},
    {"logit_end", &ModelSpec::logit_end},
};
const FloatField kFloatFields[] = {
    {"rms_eps", &ModelSpec::rms_eps},
    {"rope_theta", &ModelSpec::rope_theta},
};
const BoolField kBoolFields[] = {
    {"tied_lm_head", &ModelSpec::tied_lm_head},
};

template <class T, size_t N>
const T* find_field(const T (&fields)[N], const std::string& name) {
  for (const T& f : fields)
    if (name == f.name) return &f;
  return nullptr;
}

std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string s;
  for (size_t i = 0; i < v.size(); i++) s += (i ? sep : "") + v[i];
  return s;
}

std::vector<std::string> int_field_names() {
  std::vector<std::string> out;
  for (const auto& f : kIntFields) out.push_back(f.name);
  return out;
}

}  // namespace

bool spec_field_kind(const std::string& field, FieldKind* kind) {
  if (find_field(kIntFields, field))
    *kind = FieldKind::Int;
  else if (find_field(kFloatFields, field))
    *kind = FieldKind::Float;
  else if (find_field(kBoolFields, field))
    *kind = FieldKind::Bool;
  else
    return false;
  return true;
}

std::vector<std::string> spec_field_names() {
  std::vector<std::string> out = int_field_names();
  for (const auto& f : kFloatFields) out.push_back(f.name);
  for (const auto& f : kBoolFields) out.push_back(f.name);
  return out;
}

std::map<std::string, int64_t> spec_int_vars(const ModelSpec& spec) {
  std::map<std::string, int64_t> vars;
  for (const auto& f : kIntFields) vars[f.name] = spec.*(f.member);
  return vars;
}

void set_spec_int(ModelSpec& spec, const std::string& field, int64_t v) {
  const IntField* f = find_field(kIntFields, field);
  LOOM_CHECK(f, "no integer spec field \"", field, "\"");
  LOOM_CHECK(v >= INT32_MIN && v <= INT32_MAX, "spec field ", field, " = ", v,
             " does not fit in 32 bits");
  spec.*(f->member) = int(v);
}

void set_spec_float(ModelSpec& spec, const std::string& field, double v) {
  const FloatField* f = find_field(kFloatFields, field);
  LOOM_CHECK(f, "no float spec field \"", field, "\"");
  spec.*(f->member) = float(v);
}

void set_spec_bool(ModelSpec& spec, const std::string& field, bool v) {
  const BoolField* f = find_field(kBoolFields, field);
  LOOM_CHECK(f, "no bool spec field \"", field, "\"");
  spec.*(f->member) = v;
}

bool get_spec_bool(const ModelSpec& spec, const std::string& field) {
  const BoolField* f = find_field(kBoolFields, field);
  LOOM_CHECK(f, "no bool spec field \"", field, "\"");
  return spec.*(f->member);
}

// ---------------------------------------------------------------- expressions

namespace {

// Recursive descent over: expr := term (('+'|'-') term)*; term := factor (('*'|'/') factor)*;
// factor := integer | name | '(' expr ')'. With vars == nullptr it only checks syntax and
// names (every name counts as 1 and division is not checked).
class ExprParser {
 public:
  ExprParser(const std::string& s, const std::map<std::string, int64_t>* vars)
      : s_(s), vars_(vars) {}

  int64_t parse() {
    const int64_t v = sum();
    skip_ws();
    if (pos_ != s_.size()) error(cat("unexpected '", s_[pos_], "' at column ", pos_ + 1));
    return v;
  }

 private:
  [[noreturn]] void error(const std::string& what) { fail("expression \"", s_, "\": ", what); }
  void skip_ws() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) pos_++;
  }
  bool take(char c) {
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == c) {
      pos_++;
      return true;
    }
    return false;
  }
  int64_t sum() {
    int64_t v = product();
    for (;;) {
      if (take('+')) {
        if (__builtin_add_overflow(v, product(), &v)) error("overflow");
      } else if (take('-')) {
        if (__builtin_sub_overflow(v, product(), &v)) error("overflow");
      } else {
        return v;
      }
    }
  }
  int64_t product() {
    int64_t v = factor();
    for (;;) {
      if (take('*')) {
        if (__builtin_mul_overflow(v, factor(), &v)) error("overflow");
      } else if (take('/')) {
        const int64_t d = factor();
        if (!vars_) continue;
        if (d == 0) error("division by zero");
        if (v % d != 0) error(cat(v, " is not divisible by ", d));
        v /= d;
      } else {
        return v;
      }
    }
  }
  int64_t factor() {
    skip_ws();
    if (pos_ >= s_.size()) error("ends early");
    const char c = s_[pos_];
    if (c == '(') {
      pos_++;
      const int64_t v = sum();
      if (!take(')')) error("missing ')'");
      return v;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      int64_t v = 0;
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, s_[pos_] - '0', &v))
          error("number too large");
        pos_++;
      }
      return v;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      const size_t start = pos_;
      while (pos_ < s_.size() &&
             (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_'))
        pos_++;
      const std::string name = s_.substr(start, pos_ - start);
      if (!vars_) {
        if (!find_field(kIntFields, name))
          error(cat("unknown name \"", name, "\" (known: ", join(int_field_names()), ")"));
        return 1;
      }
      auto it = vars_->find(name);
      if (it == vars_->end() && find_field(kIntFields, name))
        error(cat("\"", name, "\" has no value here: the table's \"config\" sets no \"", name,
                  "\" before this expression"));
      if (it == vars_->end())
        error(cat("unknown name \"", name, "\" (known: ", join(int_field_names()), ")"));
      return it->second;
    }
    error(cat("unexpected '", c, "' at column ", pos_ + 1));
  }

  const std::string& s_;
  const std::map<std::string, int64_t>* vars_;
  size_t pos_ = 0;
};

void check_expr(const std::string& expr) {
  ExprParser(expr, nullptr).parse();
}

}  // namespace

int64_t eval_expr(const std::string& expr, const std::map<std::string, int64_t>& vars) {
  return ExprParser(expr, &vars).parse();
}

// ---------------------------------------------------------------- roles

bool is_known_role(const std::string& role) {
  return find_role(role) != nullptr;
}

// ---------------------------------------------------------------- table parsing

namespace {

using ojson = nlohmann::ordered_json;

ojson read_table_json(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    fail("mapping table ", path, " is a folder; expected a table's JSON file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read mapping table ", path, ": ", std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    ojson j = ojson::parse(ss.str());
    if (!j.is_object()) fail(path, ": a mapping table is a JSON object");
    return j;
  } catch (const nlohmann::json::exception& e) {
    fail(path, ": not valid JSON: ", e.what());
  }
}

void check_keys(const ojson& obj, std::initializer_list<const char*> allowed,
                const std::string& where) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    bool ok = false;
    for (const char* a : allowed) ok |= it.key() == a;
    if (!ok) {
      std::vector<std::string> names(allowed.begin(), allowed.end());
      fail(where, ": unknown key \"", it.key(), "\" (allowed: ", join(names), ")");
    }
  }
}

std::vector<std::string> string_or_list(const ojson& v, const std::string& where) {
  std::vector<std::string> out;
  if (v.is_string()) {
    out.push_back(v.get<std::string>());
  } else if (v.is_array() && !v.empty()) {
    for (const auto& e : v) {
      if (!e.is_string()) fail(where, ": expected a string or a list of strings");
      out.push_back(e.get<std::string>());
    }
  } else {
    fail(where, ": expected a string or a list of strings");
  }
  return out;
}

WeightPart parse_part(const ojson& p, const std::string& where) {
  WeightPart part;
  auto n = p.find("name");
  if (n == p.end()) fail(where, ": missing \"name\"");
  part.names = string_or_list(*n, where + " name");
  auto s = p.find("shape");
  if (s == p.end() || !s->is_array() || s->empty())
    fail(where, ": missing \"shape\" (a list of expressions of spec fields)");
  for (const auto& d : *s) {
    if (d.is_number_integer()) {
      part.shape.push_back(std::to_string(d.get<int64_t>()));
    } else if (d.is_string()) {
      part.shape.push_back(d.get<std::string>());
      try {
        check_expr(part.shape.back());
      } catch (const Error& e) {
        fail(where, " shape: ", e.what());
      }
    } else {
      fail(where, ": shape entries are integers or expressions, found ", d.dump());
    }
  }
  auto t = p.find("transform");
  if (t != p.end()) {
    if (!t->is_string() || (*t != "none" && *t != "rope_permute" && *t != "transpose"))
      fail(where, ": unknown transform ", t->dump(),
           " (known: \"none\", \"rope_permute\", \"transpose\")");
    if (*t == "transpose" && part.shape.size() != 2)
      fail(where, ": transform \"transpose\" needs a 2-D shape");
    part.transform = t->get<std::string>();
  }
  return part;
}

// One string feature: its value must be one of `names`; returns the index.
int feature_choice(const ojson& f, const char* key, std::initializer_list<const char*> names,
                   int fallback, const std::string& where) {
  auto it = f.find(key);
  if (it == f.end()) return fallback;
  int k = 0;
  std::string known;
  for (const char* n : names) {
    if (*it == n) return k;
    known += cat(k ? ", " : "", "\"", n, "\"");
    k++;
  }
  fail(where, ": ", key, " ", it->dump(), " is not a feature value loom knows (known: ", known,
       ")");
}

bool feature_bool(const ojson& f, const char* key, bool fallback, const std::string& where) {
  auto it = f.find(key);
  if (it == f.end()) return fallback;
  if (!it->is_boolean()) fail(where, ": ", key, " must be true or false, found ", it->dump());
  return it->get<bool>();
}

// "features" → t.features (the feature fields of a ModelSpec), checked for consistency.
void parse_features(const ojson& f, MappingTable& t) {
  const std::string where = t.path + ": features";
  if (!f.is_object()) fail(where, ": expected an object");
  check_keys(
      f,
      {"norm", "norm_affine", "norm_bias", "mlp", "activation", "qkv_bias", "o_bias", "mlp_bias",
       "rotary", "learned_positions", "position_offset", "action_projection", "action_mlp_layers"},
      where);
  ModelSpec& s = t.features;
  s.norm = NormKind(feature_choice(f, "norm", {"rms", "layer"}, 0, where));
  s.norm_affine = feature_bool(f, "norm_affine", true, where);
  s.norm_bias = feature_bool(f, "norm_bias", false, where);
  if (s.norm_bias && (s.norm != NormKind::Layer || !s.norm_affine))
    fail(where, ": norm_bias needs norm \"layer\" with norm_affine true");
  s.mlp = MlpKind(feature_choice(f, "mlp", {"swiglu", "plain"}, 0, where));
  if (s.mlp == MlpKind::Plain && !f.contains("activation"))
    fail(where, ": mlp \"plain\" needs an activation");
  s.act =
      Activation(feature_choice(f, "activation", {"silu", "gelu_tanh", "gelu", "relu"}, 0, where));
  s.qkv_bias = feature_bool(f, "qkv_bias", false, where);
  s.o_bias = feature_bool(f, "o_bias", false, where);
  s.mlp_bias = feature_bool(f, "mlp_bias", false, where);
  s.rotary = feature_bool(f, "rotary", true, where);
  s.positions = PositionKind(
      feature_choice(f, "learned_positions", {"none", "absolute", "spatio_temporal"}, 0, where));
  if (auto it = f.find("position_offset"); it != f.end()) {
    if (s.positions != PositionKind::Absolute)
      fail(where, ": position_offset applies only to learned_positions \"absolute\"");
    if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > 1000000)
      fail(where, ": position_offset must be an integer in [0, 1000000], found ", it->dump());
    s.position_offset = it->get<int>();
  }
  s.action_projection = ActionProjection(
      feature_choice(f, "action_projection", {"none", "linear", "mlp", "tokens"}, 0, where));
  auto layers = f.find("action_mlp_layers");
  if (s.action_projection == ActionProjection::Mlp) {
    if (layers == f.end() || !layers->is_number_integer() || layers->get<int64_t>() < 1 ||
        layers->get<int64_t>() > 64)
      fail(where, ": action_projection \"mlp\" needs action_mlp_layers in [1, 64]");
    s.action_mlp_layers = layers->get<int>();
  } else if (layers != f.end()) {
    fail(where, ": action_mlp_layers applies only to action_projection \"mlp\"");
  }
}

// The roles the features call for must be exactly the roles the table binds.
void check_roles(const MappingTable& t) {
  const std::vector<std::string> need_list = needed_roles(t.features);
  std::set<std::string> need(need_list.begin(), need_list.end());
  std::set<std::string> have;
  for (const WeightRule& r : t.weights) have.insert(r.role);
  for (const std::string& r : need_list)
    if (!have.count(r))
      fail(t.path, ": weights: no entry for role ", r, ", which the features need (",
           find_role(r)->when, ")");
  for (const std::string& r : have)
    if (!need.count(r))
      fail(t.path, ": weights: role ", r, " is not used by the features this table declares (",
           find_role(r)->when, ")");
}

}  // namespace

MappingTable parse_mapping_table(const std::string& path) {
  MappingTable t;
  t.path = path;
  const ojson j = read_table_json(path);
  check_keys(j, {"description", "architectures", "config", "config_checks", "features", "weights"},
             path);

  auto arch = j.find("architectures");
  if (arch == j.end()) fail(path, ": missing \"architectures\"");
  t.architectures = string_or_list(*arch, path + ": architectures");

  auto cfg = j.find("config");
  if (cfg == j.end() || !cfg->is_object()) fail(path, ": missing \"config\" object");
  for (auto it = cfg->begin(); it != cfg->end(); ++it) {
    const std::string where = path + ": config." + it.key();
    FieldKind kind;
    if (!spec_field_kind(it.key(), &kind))
      fail(where, ": no such spec field (known: ", join(spec_field_names()), ")");
    if (it.key() == "action_mlp_layers" || it.key() == "position_offset")
      fail(where, ": set by \"features\", not by config.json");
    ConfigField cf;
    cf.field = it.key();
    const ojson& v = it.value();
    if (v.is_string()) {
      cf.keys.push_back(v.get<std::string>());
    } else if (v.is_object()) {
      check_keys(v, {"key", "default", "shape_of"}, where);
      auto k = v.find("key");
      if (k == v.end() && !v.contains("default") && !v.contains("shape_of"))
        fail(where, ": missing \"key\", \"default\" or \"shape_of\"");
      if (auto so = v.find("shape_of"); so != v.end()) {
        if (kind != FieldKind::Int || !so->is_array() || so->size() != 2 || !(*so)[0].is_string() ||
            !(*so)[1].is_number_integer() || (*so)[1].get<int64_t>() < 0 ||
            (*so)[1].get<int64_t>() > 8)
          fail(where, ": shape_of must be [\"<tensor name>\", <dim>] on an integer field");
        cf.shape_of = (*so)[0].get<std::string>();
        cf.shape_dim = (*so)[1].get<int>();
      }
      if (k != v.end()) cf.keys = string_or_list(*k, where + ".key");
      if (auto d = v.find("default"); d != v.end()) {
        cf.fallback = nlohmann::json::parse(d->dump());
        const bool ok = (kind == FieldKind::Bool && d->is_boolean()) ||
                        (kind == FieldKind::Float && d->is_number()) ||
                        (kind == FieldKind::Int && (d->is_number_integer() || d->is_string()));
        if (!ok) fail(where, ": default ", d->dump(), " does not suit this field");
        if (d->is_string()) {
          try {
            check_expr(d->get<std::string>());
          } catch (const Error& e) {
            fail(where, " default: ", e.what());
          }
        }
      }
    } else {
      fail(where, ": expected a config key or {\"key\", \"default\"}");
    }
    t.config.push_back(std::move(cf));
  }

  if (auto cc = j.find("config_checks"); cc != j.end()) {
    if (!cc->is_object()) fail(path, ": config_checks must be an object");
    for (auto it = cc->begin(); it != cc->end(); ++it) {
      const ojson& v = it.value();
      const bool same_as =
          v.is_object() && v.size() == 1 && v.contains("same_as") && v["same_as"].is_string();
      if (!same_as && (!v.is_array() || v.empty()))
        fail(path, ": config_checks.", it.key(),
             ": expected a list of allowed values or {\"same_as\": \"<config key>\"}");
      t.config_checks.emplace_back(it.key(), nlohmann::json::parse(it.value().dump()));
    }
  }

  if (auto f = j.find("features"); f != j.end()) parse_features(*f, t);

  auto w = j.find("weights");
  if (w == j.end() || !w->is_array()) fail(path, ": missing \"weights\" list");
  std::set<std::string> seen;
  for (const auto& e : *w) {
    if (!e.is_object() || !e.contains("role") || !e["role"].is_string())
      fail(path, ": weights: every entry needs a \"role\"");
    WeightRule r;
    r.role = e["role"].get<std::string>();
    const std::string where = path + ": role " + r.role;
    if (!is_known_role(r.role)) fail(where, ": unknown role (known: ", role_names(), ")");
    if (!seen.insert(r.role).second) fail(where, ": listed twice");
    r.per_layer = r.role.compare(0, 6, "layer.") == 0;
    check_keys(e,
               {"role", "name", "shape", "transform", "parts", "merge", "required", "tied_to",
                "tied_when", "tie_if_absent", "comment"},
               where);
    if (auto parts = e.find("parts"); parts != e.end()) {
      if (e.contains("name") || e.contains("shape") || e.contains("transform"))
        fail(where, ": give either \"parts\" or \"name\"/\"shape\", not both");
      if (!parts->is_array() || parts->empty()) fail(where, ": \"parts\" must be a non-empty list");
      for (size_t k = 0; k < parts->size(); k++)
        r.parts.push_back(parse_part((*parts)[k], cat(where, " part ", k)));
    } else {
      r.parts.push_back(parse_part(e, where));
    }
    auto merge = e.find("merge");
    if (r.parts.size() > 1 && (merge == e.end() || *merge != "concat_dim0"))
      fail(where, ": ", r.parts.size(), " parts need \"merge\": \"concat_dim0\"");
    if (r.parts.size() == 1 && merge != e.end())
      fail(where, ": \"merge\" needs more than one part");
    for (const WeightPart& p : r.parts)
      for (const std::string& n : p.names)
        if (r.per_layer != (n.find("{i}") != std::string::npos))
          fail(where, ": name \"", n, "\" ",
               r.per_layer ? "needs {i} (a per-layer role)" : "must not use {i}");
    if (auto q = e.find("required"); q != e.end()) {
      if (!q->is_boolean()) fail(where, ": required must be true or false");
      r.required = q->get<bool>();
    }
    if (auto q = e.find("tied_to"); q != e.end()) {
      if (!q->is_string()) fail(where, ": tied_to must be a role name, found ", q->dump());
      r.tied_to = q->get<std::string>();
    }
    if (auto q = e.find("tied_when"); q != e.end()) {
      if (!q->is_string()) fail(where, ": tied_when must be a spec field name, found ", q->dump());
      r.tied_when = q->get<std::string>();
    }
    if (auto q = e.find("tie_if_absent"); q != e.end()) {
      if (!q->is_boolean()) fail(where, ": tie_if_absent must be true or false, found ", q->dump());
      r.tie_if_absent = q->get<bool>();
    }
    if ((!r.tied_when.empty() || r.tie_if_absent) && r.tied_to.empty())
      fail(where, ": tied_when / tie_if_absent need \"tied_to\"");
    FieldKind kind;
    if (!r.tied_when.empty() && (!spec_field_kind(r.tied_when, &kind) || kind != FieldKind::Bool))
      fail(where, ": tied_when \"", r.tied_when, "\" is not a true/false spec field");
    t.weights.push_back(std::move(r));
  }
  for (const WeightRule& r : t.weights) {
    if (r.tied_to.empty()) continue;
    auto target = std::find_if(t.weights.begin(), t.weights.end(),
                               [&](const WeightRule& o) { return o.role == r.tied_to; });
    if (target == t.weights.end() || !target->tied_to.empty() || target->per_layer != r.per_layer)
      fail(path, ": role ", r.role, ": tied_to \"", r.tied_to,
           "\" must be another untied role of the table");
  }
  check_roles(t);
  return t;
}

// ---------------------------------------------------------------- finding a table

std::vector<std::string> table_search_dirs(const std::string& tables_dir) {
  if (!tables_dir.empty()) return {tables_dir};
  // Relative to the binary only, never a path compiled in: an installed or copied loom must not
  // read a source tree that happens to exist where it was built.
  std::vector<std::string> cands;
  if (const char* env = std::getenv("LOOM_MODELS_DIR"); env && *env) {
    struct stat st;
    LOOM_CHECK(stat(env, &st) == 0 && S_ISDIR(st.st_mode), "LOOM_MODELS_DIR=", env,
               " is not a folder; expected the folder of mapping tables (unset it to use "
               "loom's own)");
    cands.push_back(env);
  }
  if (const std::string dir = exe_dir(); !dir.empty()) {
    cands.push_back(dir + "/models");                      // build tree: build/bin/models
    cands.push_back(exe_prefix() + "/share/loom/models");  // install prefix
  }
  std::vector<std::string> out;
  for (const std::string& c : cands) {
    struct stat st;
    if (stat(c.c_str(), &st) == 0 && S_ISDIR(st.st_mode) &&
        std::find(out.begin(), out.end(), c) == out.end())
      out.push_back(c);
  }
  return out;
}

std::string find_mapping_table(const std::string& architecture,
                               const std::vector<std::string>& dirs,
                               const std::string& config_path) {
  std::vector<std::string> known;
  for (const std::string& dir : dirs) {
    std::vector<std::string> files;
    if (DIR* d = opendir(dir.c_str())) {
      while (dirent* e = readdir(d)) {
        const std::string n = e->d_name;
        if (n.size() > 5 && n.compare(n.size() - 5, 5, ".json") == 0) files.push_back(n);
      }
      closedir(d);
    }
    std::sort(files.begin(), files.end());
    std::vector<std::string> matches;
    for (const std::string& f : files) {
      const std::string path = dir + "/" + f;
      const ojson j = read_table_json(path);
      auto arch = j.find("architectures");
      if (arch == j.end()) fail(path, ": missing \"architectures\"");
      for (const std::string& a : string_or_list(*arch, path + ": architectures")) {
        if (a == architecture) matches.push_back(path);
        if (std::find(known.begin(), known.end(), a) == known.end()) known.push_back(a);
      }
    }
    if (matches.size() > 1)
      fail("architecture \"", architecture, "\" is claimed by more than one table: ", join(matches),
           "; remove one or pass --model-table");
    if (matches.size() == 1) return matches[0];
  }
  if (dirs.empty()) {  // (a loom copied without its tables, or an install without share/)
    const std::string dir = exe_dir();
    fail("no mapping tables found for ", config_path, " (looked for ",
         dir.empty() ? std::string("the folder of the loom binary")
                     : cat(dir, "/models and ", exe_prefix(), "/share/loom/models"),
         "; loom finds its tables beside itself): install loom whole, set LOOM_MODELS_DIR, or "
         "pass --model-table");
  }
  fail("unknown architecture \"", architecture, "\" in ", config_path, ": no table in ", join(dirs),
       " matches (known: ", join(known), "); add models/<name>.json or pass --model-table");
}

}  // namespace loom
