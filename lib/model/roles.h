// The one list of canonical weight roles (issue 12 §2): for each, its name, whether it is bound
// once per layer, the shape loom needs as a function of the spec, which features call for it,
// where it lands in Weights (its Slot, model/weights.h) and the dtype a device backend keeps it
// in. Table parsing (which roles a table must bind), mapping (shape checks, binding), inspect
// and both backends' loads read it; nothing else spells a role list.
// Indexed roles ("action.{j}.weight") take j; the others ignore it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/spec.h"
#include "model/weights.h"

namespace loom {

// How a device backend keeps a role: in its compute dtype (the weight matrices its GEMMs read),
// or in fp32 (vectors applied elementwise in fp32: norms, biases, position tables). The first
// action layer, [hidden, action_dim], is fp32 too (a small fp32 kernel reads it), the later
// ones are matrices: FirstF32.
enum class DeviceDType { Compute, F32, FirstF32 };

struct RoleDef {
  const char* name;  // "layer.qkv"; "action.{j}.weight" for the indexed action roles
  bool per_layer;    // bound once per layer ("{i}" in the table's names)
  const char* when;  // the features that call for it, for messages: "qkv_bias"
  bool (*needed)(const ModelSpec& s, int j);
  std::vector<int64_t> (*shape)(const ModelSpec& s, int j);
  Slot where;          // its field in Weights (and in a device backend's WeightSet)
  DeviceDType device;  // how a device backend stores it

  // The role's field in a weight set: per-layer roles take `layer`, indexed ones `j`.
  template <class T>
  T* slot(WeightSet<T>& w, int layer, int j) const {
    return w.at(where, layer, j);
  }
  // The dtype a device backend computing in `compute` keeps instance j in.
  DType device_dtype(DType compute, int j) const {
    return device == DeviceDType::Compute || (device == DeviceDType::FirstF32 && j > 0)
               ? compute
               : DType::F32;
  }
};

const std::vector<RoleDef>& role_defs();

// The definition of a concrete role name ("layer.qkv", "action.2.bias") and its index j, or
// nullptr when no role has that name.
const RoleDef* find_role(const std::string& role, int* j = nullptr);

// Every concrete role name the spec's features call for, in role_defs() order.
std::vector<std::string> needed_roles(const ModelSpec& s);

// Throws unless `w` holds every role the spec's features need, each of the shape loom needs
// (a backend's load: Weights built by hand or by an old loader may lack one). `who` starts
// the message: "cpu backend: weight layer.qkv_bias of layer 0 is missing; …".
void check_weights(const ModelSpec& s, const Weights& w, const char* who);

// The names of the roles, for messages ("embed, final_norm, …, action.{j}.weight").
std::string role_names();

}  // namespace loom
