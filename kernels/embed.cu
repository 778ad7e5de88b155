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
  LOOM_ARG_CHECK(a.tokens && a.positions && a.embed && a.x && a.act_row,
                 "embed_assemble: null tokens/positions/act_row/embed/x");
  LOOM_ARG_CHECK(a.pos_spatial == nullptr || (a.pos_temporal && a.frame_slots > 0),
                 "embed_assemble: spatial table without temporal table or frame_slots");
  if (a.n_slots == 0) return Status::good();
  const int threads = a.hidden >= 512 ? 512 : 128;
  return dispatch_f32_bf16(a.t, "embed_assemble", [&](auto tag) {
    using T = decltype(tag);
    embed_assemble_kernel<T><<<a.n_slots, threads, 0, stream>>>(a);
  });
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

Status action_input_layer(const ActionInputArgs& a, cudaStream_t stream) {
  LOOM_ARG_CHECK(a.action_dim > 0 && a.hidden > 0 && a.n_act >= 0,
                 "action_input_layer: action_dim ", a.action_dim, ", hidden ", a.hidden, ", n_act ",
                 a.n_act);
  LOOM_ARG_CHECK(a.actions && a.act_slots && a.w && a.out, "action_input_layer: null pointer");
  if (a.n_act == 0) return Status::good();
  return dispatch_f32_bf16(a.out_t, "action_input_layer", [&](auto tag) {
    using T = decltype(tag);
    action_input_layer_kernel<T><<<a.n_act, 256, 0, stream>>>(
        a.actions, a.action_dim, a.act_slots, a.w, a.b, a.hidden, a.relu, static_cast<T*>(a.out));
  });
}

__global__ void resolve_future_tokens_kernel(int32_t* tokens, int n_slots, const int32_t* drawn,
                                             int offset) {
  for (int i = threadIdx.x; i < n_slots; i += blockDim.x) {
    const int32_t t = tokens[i];
    if (t <= -2) tokens[i] = drawn[-2 - t] + offset;  // -2 - r: future_token(r)
  }
}

Status resolve_future_tokens(int32_t* tokens, int n_slots, const int32_t* drawn, int offset,
                             cudaStream_t stream) {
  LOOM_ARG_CHECK(n_slots >= 0 && tokens && drawn, "resolve_future_tokens: n_slots ", n_slots,
                 " (expected >= 0), null tokens or drawn");
  if (n_slots == 0) return Status::good();
  resolve_future_tokens_kernel<<<1, 256, 0, stream>>>(tokens, n_slots, drawn, offset);
  return launch_status("resolve_future_tokens");
}

}  // namespace loom::gpu
