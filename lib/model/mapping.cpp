#include "model/mapping.h"

#include <sys/stat.h>
#include <algorithm>
#include <cmath>

#include <cstring>
#include <limits>
#include <map>
#include <regex>
#include <set>

#include "core/error.h"
#include "model/roles.h"

namespace loom {

namespace {

std::string base_name(const std::string& path) {
  const size_t p = path.find_last_of('/');
  return p == std::string::npos ? path : path.substr(p + 1);
}

std::string expand_layer(std::string tmpl, int layer) {
  const std::string key = "{i}";
  for (size_t p = tmpl.find(key); p != std::string::npos; p = tmpl.find(key, p))
    tmpl.replace(p, key.size(), std::to_string(layer));
  return tmpl;
}

// A config value read as the kind the spec field wants; `what` names it for messages.
int64_t config_int(const nlohmann::json& v, const std::string& what,
                   std::vector<std::string>* warnings) {
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>())
    return int64_t(v.get<double>());
  if (v.is_array() && !v.empty() && v[0].is_number_integer()) {
    // A list where one id is wanted (eos_token_id's is read whole by the caller).
    if (warnings) warnings->push_back(cat(what, " is a list ", v.dump(), "; using its first id"));
    return v[0].get<int64_t>();
  }
  fail(what, " is ", v.dump(), "; expected an integer");
}

// Where each spec field's value came from, for messages: "config \"vocab_size\"", "no config
// \"frames_per_round\": llama_action_tokens.json's default max_positions/(…)", …
using FieldSources = std::map<std::string, std::string>;

std::string source_of(const MappingTable& t, const FieldSources& sources,
                      const std::string& field) {
  auto it = sources.find(field);
  if (it != sources.end()) return cat(" (", it->second, ")");
  return cat(" (", base_name(t.path), " maps no config key to it: add \"", field,
             "\" to its \"config\")");
}

void validate_spec(const ModelSpec& s, const MappingTable& t, const FieldSources& sources,
                   bool head_dim_given, const std::string& where,
                   std::vector<std::string>* warnings) {
  auto positive = [&](const char* name, int64_t v) {
    LOOM_CHECK(v > 0, where, ": spec field ", name, source_of(t, sources, name), " is ", v,
               "; it must be positive");
  };
  positive("hidden", s.hidden);
  positive("layers", s.layers);
  positive("heads", s.heads);
  positive("kv_heads", s.kv_heads);
  positive("head_dim", s.head_dim);
  positive("intermediate", s.intermediate);
  positive("vocab", s.vocab);
  LOOM_CHECK(s.heads % s.kv_heads == 0, where, ": heads ", s.heads,
             " is not a multiple of kv_heads ", s.kv_heads, " (grouped-query attention)");
  LOOM_CHECK(head_dim_given || s.hidden == s.heads * s.head_dim, where, ": hidden ", s.hidden,
             " is not heads ", s.heads, " × head_dim ", s.head_dim,
             "; give head_dim in the config");
  LOOM_CHECK(!s.rotary || s.head_dim % 2 == 0, where, ": head_dim ", s.head_dim,
             " is odd; rotary embedding rotates pairs");
  LOOM_CHECK(s.rms_eps > 0 && std::isfinite(s.rms_eps), where, ": rms_eps ", s.rms_eps,
             " must be a positive number");
  LOOM_CHECK(s.rope_theta > 0 && std::isfinite(s.rope_theta), where, ": rope_theta ", s.rope_theta,
             " must be a positive number");
  LOOM_CHECK(s.bos_id < s.vocab && s.eos_id < s.vocab, where, ": bos_id ", s.bos_id, " / eos_id ",
             s.eos_id, " must be below vocab ", s.vocab);
  for (int id : s.more_eos)
    LOOM_CHECK(id >= 0 && id < s.vocab, where, ": eos id ", id, " must lie in [0, ", s.vocab, ")");

  LOOM_CHECK(s.logit_begin >= 0 && s.logit_end >= 0 && s.logit_end <= s.vocab &&
                 (s.logit_end == 0 || s.logit_begin < s.logit_end),
             where, ": the ids image slots sample, [logit_begin, logit_end) = [", s.logit_begin,
             ", ", s.logit_end, ")", source_of(t, sources, "logit_end"),
             ", must lie within the vocab of ", s.vocab, source_of(t, sources, "vocab"),
             " (logit_end 0: the whole vocab)");
  if (s.action_projection == ActionProjection::Tokens && s.logit_end > 0)
    LOOM_CHECK(s.logit_end - s.logit_begin < s.vocab, where, ": image ids [", s.logit_begin, ", ",
               s.logit_end, ")", source_of(t, sources, "logit_end"), " take the whole vocab of ",
               s.vocab,
               ", leaving no ids for action tokens; expected an image range smaller than vocab");
  if (s.positions == PositionKind::Absolute)
    LOOM_CHECK(s.max_positions > 0, where, ": max_positions is ", s.max_positions,
               "; learned absolute positions need a table of max_positions rows");

  (void)t;
  const bool frames =
      s.positions == PositionKind::SpatioTemporal || s.action_projection != ActionProjection::None;
  if (!frames) {
    LOOM_CHECK(s.image_tokens == 0 && s.action_tokens == 0, where, ": image_tokens ",
               s.image_tokens, " / action_tokens ", s.action_tokens,
               " are set, but the table declares no frame features");
    return;
  }
  LOOM_CHECK(s.image_tokens > 0, where, ": image_tokens (P) is ", s.image_tokens,
             "; a frame model needs image-token slots");
  if (s.action_projection != ActionProjection::None)
    LOOM_CHECK(s.action_tokens > 0, where, ": action_tokens (A) is ", s.action_tokens,
               "; a frame model with actions needs action slots");
  else
    LOOM_CHECK(s.action_tokens == 0, where, ": action_tokens is ", s.action_tokens,
               ", but the table declares no action input");
  if (s.action_projection == ActionProjection::Linear ||
      s.action_projection == ActionProjection::Mlp)
    LOOM_CHECK(s.action_dim > 0, where, ": action_dim is ", s.action_dim,
               "; the action projection needs its input width");
  // A new round starts from the last `overlap` frames of the old, overlap in [1, T - 1]: a round
  // of one frame could never make room for the next.
  LOOM_CHECK(s.temporal_rows >= 2, where, ": temporal_rows (frames per round, T)",
             source_of(t, sources, "temporal_rows"), " is ", s.temporal_rows,
             "; a round must hold at least 2 frames (one carried over, one new)");
  LOOM_CHECK(int64_t(s.image_tokens) + s.action_tokens <= (int64_t(1) << 24), where,
             ": image_tokens ", s.image_tokens, " + action_tokens ", s.action_tokens,
             " slots a frame; expected at most 2^24");
  LOOM_CHECK(int64_t(s.frame_slots()) * s.temporal_rows <= std::numeric_limits<int32_t>::max(),
             where, ": a round of ", s.temporal_rows, " frames × ", s.frame_slots(),
             " slots passes 2^31 positions");
  const int64_t round = int64_t(s.frame_slots()) * s.temporal_rows;
  if (s.positions == PositionKind::SpatioTemporal) {
    LOOM_CHECK(s.spatial_rows == s.image_tokens + s.action_tokens, where, ": spatial_rows ",
               s.spatial_rows, " must equal image_tokens ", s.image_tokens, " + action_tokens ",
               s.action_tokens, " = ", s.image_tokens + s.action_tokens,
               " (one learned row per frame slot)");
  } else {
    // Rotary or absolute positions: a round must fit the positions the model was trained on.
    LOOM_CHECK(s.max_positions <= 0 || round <= s.max_positions, where, ": a round of ",
               s.temporal_rows, " frames × ", s.frame_slots(), " slots = ", round,
               " passes max_positions ", s.max_positions);
    LOOM_CHECK(s.positions != PositionKind::Absolute || round <= s.max_positions, where,
               ": learned absolute positions need max_positions ≥ one round (", round, ")");
  }
  if (warnings && s.max_positions > 0 && s.max_positions < round)
    warnings->push_back(cat(where, ": max_positions ", s.max_positions, " is below one round of ",
                            s.temporal_rows, " frames × ", s.frame_slots(), " slots = ", round));
}

// The shape loom's backends expect of each role (model/roles.h), whatever the table says.
std::vector<int64_t> canonical_shape(const std::string& role, const ModelSpec& s) {
  int j = 0;
  const RoleDef* d = find_role(role, &j);
  LOOM_CHECK(d, "internal: unknown role ", role);
  return d->shape(s, j);
}

Tensor* role_slot(Weights& w, const std::string& role, int layer) {
  int j = 0;
  const RoleDef* d = find_role(role, &j);
  LOOM_CHECK(d, "internal: no weights slot for role ", role);
  return d->slot(w, layer, j);
}

// Binds every role of a table to checkpoint tensors.
class Binder {
 public:
  Binder(const MappingTable& t, const Checkpoint& ck, LoadedModel& m) : t_(t), ck_(ck), m_(m) {
    vars_ = spec_int_vars(m.spec);
  }

  void run() {
    const size_t warnings = m_.warnings.size(), notes = m_.notes.size(),
                 bindings = m_.bindings.size();
    bind_all();
    // Weights of mixed dtypes (bf16 projections beside f32 norms): read as the first weight's
    // they lost precision (f32 norms rounded to bf16: other tokens than HF's, which computes in
    // f32 on the stored values). Bound again, every one as f32, each exactly.
    const bool lossy = !converted_.empty() && m_.dtype != DType::F32;
    if (lossy) {
      m_.warnings.resize(warnings);
      m_.notes.resize(notes);
      m_.bindings.resize(bindings);
      used_.clear();
      converted_.clear();
      m_.dtype = DType::F32;
      bind_all();
    }
    for (const auto& [from, n] : converted_)
      m_.warnings.push_back(cat(n, " weight tensor", n > 1 ? "s" : "", " stored as ", from,
                                " converted to ", dtype_name(m_.dtype),
                                lossy ? ": the checkpoint mixes weight dtypes, so every weight "
                                        "is read as f32, each exactly"
                                      : ", the checkpoint's dtype (its first weight's)"));
    // An unused tensor of a module whose other tensors are bound (a bias beside a bound
    // weight), or an unused weight of a module beside bound ones (Qwen3's self_attn.q_norm
    // beside a bound q_proj) is math the table leaves out: an error, as vLLM's loaders make it.
    // Others (a rotary inv_freq buffer, GPT-2's attention masks) are only warned about.
    std::set<std::string> modules, parents;
    for (const std::string& name : used_) {
      modules.insert(module_of(name));
      parents.insert(module_of(module_of(name)));
    }
    std::vector<std::string> left_out;
    // One warning per name pattern, layers as {i}: a 48-layer GPT-2's attention masks are two.
    std::map<std::string, std::pair<std::string, int>> unused;  // pattern → (a name, count)
    for (const std::string& name : ck_.names()) {
      if (used_.count(name)) continue;
      const bool weight = name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0;
      const std::string parent = module_of(module_of(name));  // "" at the root: not a layer's
      if (modules.count(module_of(name)) || (weight && !parent.empty() && parents.count(parent))) {
        left_out.push_back(name);
        continue;
      }
      static const std::regex layer_number(R"(\.\d+\.)");
      auto& [first, count] = unused[std::regex_replace(name, layer_number, ".{i}.")];
      if (count++ == 0) first = name;
    }
    for (const auto& [pattern, seen] : unused)
      m_.warnings.push_back(cat("unused checkpoint tensor ", seen.second > 1 ? pattern : seen.first,
                                seen.second > 1 ? cat(" ×", seen.second) : std::string(), " (",
                                base_name(ck_.file_of(seen.first)), "): no role in ",
                                base_name(t_.path), " uses it"));
    if (!left_out.empty())
      fail(ck_.file_of(left_out[0]), ": ", left_out[0], " belongs to module ",
           module_of(left_out[0]),
           modules.count(module_of(left_out[0]))
               ? ", whose other tensors "
               : cat(" in ", module_of(module_of(left_out[0])), ", whose other modules' tensors "),
           base_name(t_.path), " binds, but no role uses it",
           left_out.size() > 1 ? cat(" (nor ", left_out.size() - 1, " more like it: ", left_out[1],
                                     left_out.size() > 2 ? ", …" : "", ")")
                               : std::string(),
           "; loom's output would differ from the model's. Expected the table to bind it (a "
           "feature such as qkv_bias and its role) or a checkpoint without it");
  }

  // The config key that sets bool spec field `field` to false, if the config has one.
  std::string config_key_set_false(const std::string& field) const {
    for (const ConfigField& cf : t_.config)
      if (cf.field == field)
        for (const std::string& k : cf.keys) {
          auto it = ck_.config().find(k);
          if (it != ck_.config().end() && it->is_boolean() && !it->get<bool>()) return k;
        }
    return "";
  }

  // "model.layers.0.self_attn.q_proj.bias" → "model.layers.0.self_attn.q_proj".
  static std::string module_of(const std::string& name) {
    const size_t dot = name.rfind('.');
    return dot == std::string::npos ? std::string() : name.substr(0, dot);
  }

 private:
  struct Found {
    const WeightPart* part;
    std::string name;  // "" when absent
    const SafetensorsFile::Entry* entry = nullptr;
  };

  std::string role_desc(const WeightRule& r, int layer) const {
    return layer >= 0 ? cat("role ", r.role, ", layer ", layer) : cat("role ", r.role);
  }

  void bind(const WeightRule& r, int layer) {
    std::vector<Found> found;
    for (const WeightPart& p : r.parts) {
      Found f{&p, "", nullptr};
      for (const std::string& tmpl : p.names) {
        const std::string n = layer >= 0 ? expand_layer(tmpl, layer) : tmpl;
        if (const auto* e = ck_.find(n)) {
          f.name = n;
          f.entry = e;
          break;
        }
      }
      found.push_back(f);
    }
    const bool any = std::any_of(found.begin(), found.end(), [](auto& f) { return f.entry; });

    if (!r.tied_when.empty() && get_spec_bool(m_.spec, r.tied_when)) {
      for (const Found& f : found)
        if (f.entry) {
          used_.insert(f.name);
          m_.warnings.push_back(
              cat(f.name, " ignored: ", r.tied_when, " ties ", r.role, " to ", r.tied_to));
        }
      tie(r, layer, cat(r.role, " tied to ", r.tied_to, " (", r.tied_when, ")"), m_.notes);
      return;
    }
    if (!any && r.tie_if_absent) {
      // A config that says the head is not tied means its absence is a missing tensor (a shard
      // the index no longer lists), not a tied head: HF would leave it random.
      const std::string key = r.tied_when.empty() ? "" : config_key_set_false(r.tied_when);
      LOOM_CHECK(key.empty(), "missing tensor ", found[0].part->names[0], " (", role_desc(r, layer),
                 ") in ", ck_.dir(), ": ", ck_.config_path(), " says \"", key,
                 "\": false, so it is not tied to ", r.tied_to);
      if (!r.tied_when.empty()) set_spec_bool(m_.spec, r.tied_when, true);
      tie(r, layer,
          cat(r.role, " tied to ", r.tied_to, ": ", found[0].part->names[0], " is absent"),
          m_.warnings);
      return;
    }
    if (!any && !r.required) return;
    for (const Found& f : found)
      if (!f.entry) {
        const auto& names = f.part->names;
        std::string alts;
        for (size_t k = 1; k < names.size(); k++)
          alts += (k == 1 ? " (or " : ", ") + expand_layer(names[k], layer) +
                  (k + 1 == names.size() ? ")" : "");
        fail("missing tensor ", layer >= 0 ? expand_layer(names[0], layer) : names[0], alts, " (",
             role_desc(r, layer), ") in ", ck_.dir());
      }

    for (const Found& f : found) check_part(r, layer, f);

    Binding b;
    b.role = r.role;
    b.layer = layer;
    Tensor out;
    bool copy = found.size() > 1 || found[0].part->transform != "none";
    for (const Found& f : found)
      if (f.entry->dtype != m_.dtype) {  // a weight of another float dtype: converted
        copy = true;
        ++converted_[dtype_name(f.entry->dtype)];
      }
    if (!copy) {
      out = ck_.tensor(found[0].name);
    } else {
      out = assemble(r, layer, found);
      if (found.size() > 1) b.note = cat("merged ", found.size(), " parts");
    }
    for (const Found& f : found) {
      used_.insert(f.name);
      b.hf_names.push_back(f.name);
      for (const std::string& tmpl : f.part->names)
        if (expand_layer(tmpl, layer) == f.name) b.templates.push_back(tmpl);
      if (f.part->transform != "none")  // which part, when there are several (by template)
        b.note +=
            (b.note.empty() ? "" : ", ") + f.part->transform +
            (found.size() == 1
                 ? ""
                 : " on " + (layer >= 0 && !b.templates.empty() ? b.templates.back() : f.name));
    }
    const std::vector<int64_t> want = canonical_shape(r.role, m_.spec);
    if (out.shape != want)
      fail(t_.path, ": ", role_desc(r, layer), " is assembled as ", shape_str(out.shape),
           " but loom needs ", shape_str(want), "; fix the table's shapes or parts");
    b.shape = out.shape;
    b.dtype = out.dtype;
    b.bytes = out.nbytes();
    *role_slot(m_.weights, r.role, layer) = std::move(out);
    m_.bindings.push_back(std::move(b));
  }

  void check_part(const WeightRule& r, int layer, const Found& f) {
    const auto& e = *f.entry;
    const std::string& file = ck_.file_of(f.name);
    LOOM_CHECK(e.foreign.empty(), file, ": ", f.name, " is ", e.foreign,
               "; weights must be bf16, f16 or f32 (", role_desc(r, layer), ")");
    if (!dtype_set_) {
      LOOM_CHECK(e.dtype == DType::BF16 || e.dtype == DType::F16 || e.dtype == DType::F32, file,
                 ": ", f.name, " is ", dtype_name(e.dtype), "; weights must be bf16, f16 or f32");
      m_.dtype = e.dtype;
      dtype_set_ = true;
    }
    std::vector<int64_t> want;
    for (const std::string& expr : f.part->shape) {
      try {
        want.push_back(eval_expr(expr, vars_));
      } catch (const Error& err) {
        fail(t_.path, ": shape of ", f.name, ": ", err.what());
      }
    }
    const bool float_dtype =
        e.dtype == DType::BF16 || e.dtype == DType::F16 || e.dtype == DType::F32;
    LOOM_CHECK(float_dtype, file, ": ", f.name, " is ", dtype_name(e.dtype),
               "; weights must be bf16, f16 or f32 (", role_desc(r, layer), ")");
    if (e.shape != want) {
      const bool transposed = want.size() == 2 && e.shape.size() == 2 && want[0] != want[1] &&
                              e.shape[0] == want[1] && e.shape[1] == want[0];
      fail(file, ": expected ", shape_str(want), " ", dtype_name(m_.dtype), ", found ",
           shape_str(e.shape), " ", dtype_name(e.dtype), " for ", f.name, " (", role_desc(r, layer),
           " in ", base_name(t_.path), ")",
           transposed ? cat("; the tensor is stored transposed: ", base_name(t_.path),
                            " expects the HF [out, in] layout, or give the part \"transform\": "
                            "\"transpose\"")
                      : std::string());
    }
  }

  // Concatenates parts along dim 0 (applying transforms) into one owned buffer.
  Tensor assemble(const WeightRule& r, int layer, const std::vector<Found>& found) {
    auto part_shape = [](const Found& f) {
      std::vector<int64_t> es = f.entry->shape;
      if (f.part->transform == "transpose") std::swap(es[0], es[1]);
      return es;
    };
    std::vector<int64_t> shape = part_shape(found[0]);
    shape[0] = 0;
    size_t total = 0;  // in the model's dtype
    for (const Found& f : found) {
      const std::vector<int64_t> es = part_shape(f);
      LOOM_CHECK(
          es.size() == shape.size() && std::equal(es.begin() + 1, es.end(), shape.begin() + 1),
          t_.path, ": ", role_desc(r, layer), ": parts ", found[0].name, " ",
          shape_str(found[0].entry->shape), " and ", f.name, " ", shape_str(es),
          " cannot be concatenated along dim 0");
      shape[0] += es[0];
      total += f.entry->nbytes() / dtype_size(f.entry->dtype) * dtype_size(m_.dtype);
    }
    // Uninitialised on purpose: every byte is written below, and zero-filling first would
    // double the page faults and memory traffic of the ~1.2 GB Terra merges.
    std::shared_ptr<uint8_t[]> bytes(new uint8_t[total]);
    size_t off = 0;
    for (const Found& f : found) {
      Tensor src = ck_.tensor(f.name);
      if (src.dtype != m_.dtype) src = converted(src, m_.dtype);
      const size_t n = src.nbytes();
      if (f.part->transform == "rope_permute") {
        const int64_t rows = src.shape[0];
        const int64_t hd = m_.spec.head_dim;
        LOOM_CHECK(rows % hd == 0, t_.path, ": rope_permute on ", f.name, ": ", rows,
                   " rows are not whole heads of head_dim ", hd);
        rope_permute_rows(static_cast<const uint8_t*>(src.data), bytes.get() + off, rows,
                          rows ? n / size_t(rows) : 0, hd);
      } else if (f.part->transform == "transpose") {
        // [rows, cols] → [cols, rows], element by element (GPT-2 Conv1D stores [in, out]).
        const int64_t rows = src.shape[0], cols = src.shape[1];
        const size_t es = dtype_size(src.dtype);
        const uint8_t* from = static_cast<const uint8_t*>(src.data);
        uint8_t* to = bytes.get() + off;
        for (int64_t r0 = 0; r0 < rows; r0++)
          for (int64_t c0 = 0; c0 < cols; c0++)
            std::memcpy(to + (size_t(c0) * size_t(rows) + size_t(r0)) * es,
                        from + (size_t(r0) * size_t(cols) + size_t(c0)) * es, es);
      } else {
        std::memcpy(bytes.get() + off, src.data, n);
      }
      off += n;
    }
    Tensor out;
    out.dtype = m_.dtype;
    out.shape = shape;
    out.data = bytes.get();
    out.owner = std::move(bytes);
    return out;
  }

  // `src` (bf16, f16 or f32) as dtype `to`, in a buffer of its own (round to nearest even).
  static Tensor converted(const Tensor& src, DType to) {
    const std::vector<float> v = src.to_f32();
    std::shared_ptr<uint8_t[]> bytes(new uint8_t[v.size() * dtype_size(to)]);
    for (size_t i = 0; i < v.size(); i++) {
      if (to == DType::F32) {
        std::memcpy(bytes.get() + 4 * i, &v[i], 4);
      } else {
        const uint16_t h = to == DType::BF16 ? f32_to_bf16(v[i]) : f32_to_f16(v[i]);
        std::memcpy(bytes.get() + 2 * i, &h, 2);
      }
    }
    Tensor out;
    out.dtype = to;
    out.shape = src.shape;
    out.data = bytes.get();
    out.owner = std::move(bytes);
    return out;
  }

  // `said`: the model's notes for a tie its config asks for, its warnings for the table's
  // fallback (a tensor the checkpoint lacks).
  void tie(const WeightRule& r, int layer, const std::string& message,
           std::vector<std::string>& said) {
    const Tensor& target = *role_slot(m_.weights, r.tied_to, layer);
    LOOM_CHECK(!target.empty(), t_.path, ": ", role_desc(r, layer), " is tied to ", r.tied_to,
               ", which is not bound");
    const std::vector<int64_t> want = canonical_shape(r.role, m_.spec);
    LOOM_CHECK(target.shape == want, t_.path, ": ", role_desc(r, layer), " is tied to ", r.tied_to,
               " of shape ", shape_str(target.shape), " but needs ", shape_str(want));
    *role_slot(m_.weights, r.role, layer) = target;
    said.push_back(message);
    Binding b;
    b.role = r.role;
    b.layer = layer;
    b.shape = target.shape;
    b.dtype = target.dtype;
    b.bytes = 0;
    b.note = "tied to " + r.tied_to;
    for (const Binding& o : m_.bindings)
      if (o.role == r.tied_to && o.layer == layer) {
        b.hf_names = o.hf_names;
        b.templates = o.templates;
      }
    m_.bindings.push_back(std::move(b));
  }

  void bind_all() {
    const ModelSpec& s = m_.spec;
    m_.weights = Weights{};
    m_.weights.layers.assign(size_t(s.layers), LayerWeights{});
    m_.weights.action.assign(size_t(s.action_layers()), ActionLayer{});
    // Untied roles first, so that a tie always finds its target bound.
    for (int pass = 0; pass < 2; pass++)
      for (const WeightRule& r : t_.weights) {
        if (r.tied_to.empty() != (pass == 0)) continue;
        if (r.per_layer)
          for (int i = 0; i < s.layers; i++) bind(r, i);
        else
          bind(r, -1);
      }
  }

  const MappingTable& t_;
  const Checkpoint& ck_;
  LoadedModel& m_;
  std::map<std::string, int64_t> vars_;
  std::set<std::string> used_;
  bool dtype_set_ = false;
  std::map<std::string, int> converted_;  // dtype name → weights converted from it
};

}  // namespace

ModelSpec spec_from_config(const MappingTable& t, const nlohmann::json& config,
                           const std::string& config_path, std::vector<std::string>* warnings,
                           const Checkpoint* checkpoint) {
  ModelSpec s = t.features;             // feature fields from the table, the rest defaults
  std::map<std::string, int64_t> vars;  // int fields set so far (defaults may use them)
  bool head_dim_given = false;
  FieldSources sources;
  for (const ConfigField& cf : t.config) {
    FieldKind kind;
    spec_field_kind(cf.field, &kind);
    const nlohmann::json* v = nullptr;
    std::string key;
    for (const std::string& k : cf.keys) {
      auto it = config.find(k);
      // Meta's params.json writes "vocab_size": -1 for "take it from the tokenizer": with a
      // tensor to read the field from, -1 counts as absent.
      const bool unset = !cf.shape_of.empty() && it != config.end() && *it == -1;
      if (it != config.end() && !it->is_null() && !unset) {
        v = &*it;
        key = k;
        break;
      }
    }
    if (cf.field == "head_dim") head_dim_given = v != nullptr;
    const std::string what = cat(config_path, ": \"", key, "\" (spec field ", cf.field, ")");
    const std::string first_key = cf.keys.empty() ? std::string("(no key)") : cf.keys[0];
    const std::string table_name = base_name(t.path);
    if (v)
      sources[cf.field] = cat("config \"", key, "\"");
    else if (!cf.shape_of.empty() && checkpoint && checkpoint->find(cf.shape_of))
      sources[cf.field] = cat("the shape of ", cf.shape_of);
    else if (cf.keys.empty())
      sources[cf.field] = cat("set by ", table_name, " to ", cf.fallback.dump());
    else
      sources[cf.field] =
          cat("no config \"", first_key, "\": ", table_name, "'s default ", cf.fallback.dump());
    if (v) {
      if (kind == FieldKind::Int) {
        if (cf.field == "eos_id" && v->is_array() && !v->empty()) {
          // Llama 3's [128001, 128008, 128009]: generation ends at any of them, as in HF.
          for (const auto& id : *v)
            LOOM_CHECK(id.is_number_integer(), what, " is ", v->dump(),
                       "; expected an integer or a list of integers");
          s.more_eos.assign(v->begin() + 1, v->end());
        }
        set_spec_int(s, cf.field,
                     cf.field == "eos_id" && v->is_array() && !v->empty()
                         ? (*v)[0].get<int64_t>()
                         : config_int(*v, what, warnings));
      } else if (kind == FieldKind::Float) {
        LOOM_CHECK(v->is_number(), what, " is ", v->dump(), "; expected a number");
        set_spec_float(s, cf.field, v->get<double>());
      } else {
        LOOM_CHECK(v->is_boolean(), what, " is ", v->dump(), "; expected true or false");
        set_spec_bool(s, cf.field, v->get<bool>());
      }
    } else if (!cf.shape_of.empty() && checkpoint && checkpoint->find(cf.shape_of)) {
      const auto& shape = checkpoint->find(cf.shape_of)->shape;
      LOOM_CHECK(size_t(cf.shape_dim) < shape.size(), t.path, ": ", cf.field, " from dim ",
                 cf.shape_dim, " of ", cf.shape_of, ", which has shape ", shape_str(shape));
      set_spec_int(s, cf.field, shape[size_t(cf.shape_dim)]);
    } else if (!cf.shape_of.empty() && cf.fallback.is_null()) {
      fail(config_path, ": no \"", first_key, "\" and no tensor ", cf.shape_of, " to read ",
           cf.field, " from (", t.path, ")");
    } else if (cf.fallback.is_null()) {
      fail(config_path, ": missing \"", first_key, "\" (spec field ", cf.field, ", required by ",
           t.path, ")");
    } else if (cf.fallback.is_string()) {
      try {
        set_spec_int(s, cf.field, eval_expr(cf.fallback.get<std::string>(), vars));
      } catch (const Error& e) {
        if (cf.keys.empty())  // no config key: the table's formula itself does not fit
          fail(config_path, ": ", cf.field, " (", base_name(t.path), " sets it to \"",
               cf.fallback.get<std::string>(), "\") fails: ", e.what());
        fail(config_path, ": no \"", first_key, "\", and the default of ", cf.field,
             " fails: ", e.what());
      }
    } else if (kind == FieldKind::Int) {
      set_spec_int(s, cf.field, cf.fallback.get<int64_t>());
    } else if (kind == FieldKind::Float) {
      set_spec_float(s, cf.field, cf.fallback.get<double>());
    } else {
      set_spec_bool(s, cf.field, cf.fallback.get<bool>());
    }
    if (kind == FieldKind::Int) vars[cf.field] = spec_int_vars(s)[cf.field];
  }

  for (const auto& [key, allowed] : t.config_checks) {
    auto it = config.find(key);
    if (it == config.end()) continue;
    if (allowed.is_object()) {  // {"same_as": other key}
      const std::string other = allowed["same_as"].get<std::string>();
      auto o = config.find(other);
      if (o != config.end() && !it->is_null() && *it != *o)
        fail(config_path, ": \"", key, "\" is ", it->dump(), " but \"", other, "\" is ", o->dump(),
             "; ", t.path, " supports only equal values");
      continue;
    }
    if (std::find(allowed.begin(), allowed.end(), *it) == allowed.end())
      fail(config_path, ": \"", key, "\" is ", it->dump(), "; ", t.path, " supports only ",
           allowed.dump());
  }

  validate_spec(s, t, sources, head_dim_given, config_path, warnings);
  return s;
}

void rope_permute_rows(const uint8_t* src, uint8_t* dst, int64_t rows, size_t row_bytes,
                       int64_t head_dim) {
  LOOM_CHECK(head_dim > 0 && head_dim % 2 == 0 && rows % head_dim == 0, "rope_permute: ", rows,
             " rows are not whole heads of even head_dim ", head_dim);
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < rows / head_dim; h++)
    for (int64_t a = 0; a < 2; a++)
      for (int64_t j = 0; j < half; j++) {
        const int64_t to = h * head_dim + a * half + j;
        const int64_t from = h * head_dim + 2 * j + a;
        std::memcpy(dst + size_t(to) * row_bytes, src + size_t(from) * row_bytes, row_bytes);
      }
}

std::string choose_mapping_table(const Checkpoint& ck, const LoadOptions& opts, std::string* arch) {
  const std::string& config_path = ck.config_path();
  arch->clear();
  auto a = ck.config().find("architectures");
  if (a != ck.config().end() && a->is_array() && !a->empty() && (*a)[0].is_string())
    *arch = (*a)[0].get<std::string>();
  const std::vector<std::string> dirs = table_search_dirs(opts.tables_dir);
  struct stat st {};
  if (!opts.table_path.empty()) {
    // A bare name that is no file here ("llama_meta.json") is one of loom's own tables.
    if (opts.table_path.find('/') == std::string::npos && stat(opts.table_path.c_str(), &st) != 0)
      for (const std::string& dir : dirs)
        if (stat((dir + "/" + opts.table_path).c_str(), &st) == 0)
          return dir + "/" + opts.table_path;
    return opts.table_path;
  }
  if (arch->empty() && base_name(config_path) == "params.json")
    *arch = "MetaLlamaForCausalLM";  // models/llama_meta.json
  LOOM_CHECK(!arch->empty(), config_path,
             ": no \"architectures\" list to choose a mapping table by; pass --model-table FILE");
  return find_mapping_table(*arch, dirs, config_path);
}

// generation_config.json's eos_token_id (HF generate stops at these; Llama 3 Instruct lists
// its end-of-turn id only there): each joins the spec's end ids.
void add_generation_eos(const Checkpoint& ck, ModelSpec& s) {
  const nlohmann::json& g = ck.generation_config();
  if (!g.is_object() || !g.contains("eos_token_id") || g["eos_token_id"].is_null()) return;
  const nlohmann::json& v = g["eos_token_id"];
  const std::string where = ck.dir() + "/generation_config.json: \"eos_token_id\"";
  LOOM_CHECK(v.is_number_integer() || v.is_array(), where, " is ", v.dump(),
             "; expected an integer or a list of integers");
  for (const nlohmann::json& id : v.is_array() ? v : nlohmann::json::array({v})) {
    LOOM_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < s.vocab,
               where, " is ", v.dump(), "; expected ids in [0, ", s.vocab, ")");
    const int e = id.get<int>();
    if (s.eos_id < 0)
      s.eos_id = e;
    else if (e != s.eos_id &&
             std::find(s.more_eos.begin(), s.more_eos.end(), e) == s.more_eos.end())
      s.more_eos.push_back(e);
  }
}

ModelSpec checkpoint_spec(const Checkpoint& ck, const MappingTable& table,
                          const std::string& table_path, std::vector<std::string>* warnings) {
  try {
    ModelSpec s = spec_from_config(table, ck.config(), ck.config_path(), warnings, &ck);
    add_generation_eos(ck, s);
    return s;
  } catch (const Error& e) {
    const std::string msg = e.what();
    if (msg.find(base_name(table_path)) != std::string::npos) throw;
    fail(msg, " (mapping table ", table_path, ")");
  }
}

LoadedModel load_model(const std::string& model_dir, const LoadOptions& opts) {
  LoadedModel m;
  m.checkpoint = Checkpoint::open(model_dir);
  const Checkpoint& ck = *m.checkpoint;
  m.warnings = ck.warnings();
  const std::string config_path = ck.config_path();
  std::string arch;
  m.table_path = choose_mapping_table(ck, opts, &arch);
  const MappingTable table = parse_mapping_table(m.table_path);
  if (arch.empty()) arch = table.architectures[0];
  if (std::find(table.architectures.begin(), table.architectures.end(), arch) ==
      table.architectures.end())
    m.warnings.push_back(cat(config_path, ": architecture \"", arch, "\" is not listed in ",
                             m.table_path, "; using that table as asked"));

  // From here every error is about this checkpoint read through this table; messages that
  // name only config.json or a tensor (a field, a spec check, a missing tensor) get the table.
  m.spec = checkpoint_spec(ck, table, m.table_path, &m.warnings);
  m.spec.architecture = arch;
  m.spec.table = base_name(m.table_path);
  try {
    for (const SafetensorsFile& f : ck.files()) f.prefetch();
    Binder(table, ck, m).run();
  } catch (const Error& e) {
    const std::string msg = e.what();
    if (msg.find(base_name(m.table_path)) != std::string::npos) throw;
    fail(msg, " (mapping table ", m.table_path, ")");
  }

  size_t embed_bytes = 0;
  int64_t embed_params = 0;
  for (const Binding& b : m.bindings) {
    if (b.bytes == 0) continue;
    int64_t n = 1;
    for (int64_t d : b.shape) n *= d;
    m.parameters += n;
    m.bytes += b.bytes;
    if (b.role == "embed") embed_bytes = b.bytes, embed_params = n;
  }
  m.step_bytes = m.bytes - embed_bytes + (m.spec.tied_lm_head ? embed_bytes : 0);
  m.step_params = m.parameters - embed_params + (m.spec.tied_lm_head ? embed_params : 0);
  return m;
}

}  // namespace loom
