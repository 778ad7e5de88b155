#include "kernels/common.cuh"
#include "kernels/embed.cuh"

namespace loom::gpu {

template <class T>
__global__ void embed_assemble_kernel(EmbedArgs a) {
  const int slot = blockIdx.x;
  const int tok = a.tokens[slot];
  const T* src = tok >= 0 ? static_cast<const T*>(a.embed) + size_t(tok) * a.hidden
                          : static_cast<const T*>(a.act_out) + size_t(a.act_row[slot]) * a.hidden;
  const float* ps = nullptr;
  const float* pt = nullptr;
  if (a.pos_spatial != nullptr) {
    const int p = a.positions[slot];
    ps = a.pos_spatial + size_t(p % a.frame_slots) * a.hidden;
    pt = a.pos_temporal + size_t(p / a.frame_slots) * a.hidden;
  }
  float* x = a.x + size_t(slot) * a.hidden;
  for (int i = threadIdx.x; i < a.hidden; i += blockDim.x) {
    float v = to_f32(src[i]);
    // HF adds the two tables to each other first, then to the embedding.
    if (ps != nullptr) v += ps[i] + pt[i];
    x[i] = v;
  }
}

Status embed_assemble(const EmbedArgs& a, cudaStream_t stream) {
  LOOM_ARG_CHECK(a.n_slots >= 0 && a.hidden > 0, "embed_assemble: n_slots ", a.n_slots, ", hidden ",
                 a.hidden, " (expected >= 0, > 0)");
  LOOM_ARG_CHECK(a.t == DType::F32 || a.t == DType::BF16, "embed_assemble: dtype ", dtype_name(a.t),
                 " (expected f32 or bf16)");
  LOOM_ARG_CHECK(a.tokens && a.positions && a.embed && a.x && a.act_row,
                 "embed_assemble: null tokens/positions/act_row/embed/x");
  LOOM_ARG_CHECK(a.pos_spatial == nullptr || (a.pos_temporal && a.frame_slots > 0),
                 "embed_assemble: spatial table without temporal table or frame_slots");
  if (a.n_slots == 0) return Status::good();
  const int threads = a.hidden >= 512 ? 512 : 128;
  if (a.t == DType::F32)
    embed_assemble_kernel<float><<<a.n_slots, threads, 0, stream>>>(a);
  else
    embed_assemble_kernel<bf16><<<a.n_slots, threads, 0, stream>>>(a);
  return launch_status("embed_assemble");
}

template <class T>
__global__ void action_input_layer_kernel(const float* actions, int action_dim,
                                          const int32_t* act_slots, const float* w, const float* b,
                                          int hidden, bool relu, T* out) {
  const int r = blockIdx.x;
  const float* a = actions + size_t(act_slots[r]) * action_dim;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
    float v = b != nullptr ? b[i] : 0.0f;
    for (int j = 0; j < action_dim; j++) v += w[size_t(i) * action_dim + j] * a[j];
    if (relu) v = fmaxf(v, 0.0f);
    out[size_t(r) * hidden + i] = from_f32<T>(v);
  }
}

Status action_input_layer(const float* actions, int action_dim, const int32_t* act_slots, int n_act,
                          const float* w, const float* b, int hidden, bool relu, DType out_t,
                          void* out, cudaStream_t stream) {
  LOOM_ARG_CHECK(action_dim > 0 && hidden > 0 && n_act >= 0, "action_input_layer: action_dim ",
                 action_dim, ", hidden ", hidden, ", n_act ", n_act);
  LOOM_ARG_CHECK(actions && act_slots && w && out, "action_input_layer: null pointer");
  if (n_act == 0) return Status::good();
  if (out_t == DType::F32)
    action_input_layer_kernel<float><<<n_act, 256, 0, stream>>>(
        actions, action_dim, act_slots, w, b, hidden, relu, static_cast<float*>(out));
  else if (out_t == DType::BF16)
    action_input_layer_kernel<bf16><<<n_act, 256, 0, stream>>>(
        actions, action_dim, act_slots, w, b, hidden, relu, static_cast<bf16*>(out));
  else
    return Status::bad(cat("action_input_layer: dtype ", dtype_name(out_t)));
  return launch_status("action_input_layer");
}

template <class T>
__global__ void bias_act_kernel(T* y, const float* bias, size_t total, int n, bool relu) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total;
       i += size_t(gridDim.x) * blockDim.x) {
    float v = to_f32(y[i]) + (bias != nullptr ? bias[i % n] : 0.0f);
    if (relu) v = fmaxf(v, 0.0f);
    y[i] = from_f32<T>(v);
  }
}

Status bias_act(DType t, void* y, const float* bias, int rows, int n, bool relu,
                cudaStream_t stream) {
  LOOM_ARG_CHECK(rows >= 0 && n > 0 && y, "bias_act: rows ", rows, ", n ", n);
  const size_t total = size_t(rows) * n;
  if (total == 0) return Status::good();
  const int blocks = int(std::min<size_t>((total + 255) / 256, 4096));
  if (t == DType::F32)
    bias_act_kernel<float>
        <<<blocks, 256, 0, stream>>>(static_cast<float*>(y), bias, total, n, relu);
  else if (t == DType::BF16)
    bias_act_kernel<bf16><<<blocks, 256, 0, stream>>>(static_cast<bf16*>(y), bias, total, n, relu);
  else
    return Status::bad(cat("bias_act: dtype ", dtype_name(t)));
  return launch_status("bias_act");
}

}  // namespace loom::gpu
