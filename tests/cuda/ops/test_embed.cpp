// The embed family (kernels/embed.h): action_input_layer (with and without bias and ReLU) and
// embed_assemble (token rows, action rows, with and without the spatial + temporal tables)
// against their fp32 references over odd widths (3, 19, 99, 2053), f32 (rel. error ≤ 1e-5) and
// bf16 (≤ 1e-2; the embedding rounded to bf16 for the reference, the projected actions rounded
// where the kernel stores them). Outputs are poisoned with NaN before each run. The references'
// fixed values: ops/embed_ref.h.
#include <doctest/doctest.h>

#include "backend/backend.h"
#include "cuda/cuda_test_util.h"
#include "kernels/embed.cuh"
#include "ops/embed_ref.h"

using namespace loom;
using namespace loom::test;

TEST_CASE("action_input_layer and embed_assemble match their references") {
  const int vocab = 1000, adim = 3, S = 13, T = 6;
  const std::vector<int32_t> tokens = {5, kActionSlot, 999, 0, kActionSlot, 17, 3};
  const std::vector<int32_t> pos = {0, 12, 13, 25, 38, 77, 40};
  const int n = int(tokens.size());
  std::vector<int32_t> act_row(size_t(n), -1), act_slots;
  for (int i = 0; i < n; i++)
    if (tokens[size_t(i)] < 0) act_row[size_t(i)] = int(act_slots.size()), act_slots.push_back(i);
  const int n_act = int(act_slots.size());
  for (DType t : {DType::F32, DType::BF16})
    for (int hidden : {3, 19, 99, 2053})
      for (bool frames : {true, false})
        for (bool relu_bias : {false, true}) {
          CAPTURE(dtype_name(t));
          CAPTURE(hidden);
          CAPTURE(frames);
          CAPTURE(relu_bias);
          std::vector<float> embed = random_vec(size_t(vocab) * hidden, 13);
          if (t == DType::BF16) embed = round_bf16(embed);
          const std::vector<float> ps = random_vec(size_t(S) * hidden, 14),
                                   pt = random_vec(size_t(T) * hidden, 15),
                                   actions = random_vec(size_t(n) * adim, 16),
                                   w0 = random_vec(size_t(hidden) * adim, 17),
                                   b0 = random_vec(size_t(hidden), 18);
          // Host: the action rows, then the assembly from their rounded values.
          ActionInputArgs in{actions.data(), adim,      act_slots.data(),
                             n_act,          w0.data(), relu_bias ? b0.data() : nullptr,
                             hidden,         relu_bias, DType::F32,
                             nullptr};
          std::vector<float> act(size_t(n_act) * hidden), ref(size_t(n) * hidden);
          in.out = act.data();
          cpu::action_input_layer(in);
          const std::vector<float> act_t = t == DType::BF16 ? round_bf16(act) : act;
          EmbedArgs e;
          e.t = DType::F32;
          e.tokens = tokens.data();
          e.positions = pos.data();
          e.act_row = act_row.data();
          e.embed = embed.data();
          e.act_out = act_t.data();
          if (frames) {
            e.pos_spatial = ps.data();
            e.pos_temporal = pt.data();
            e.frame_slots = S;
            e.spatial_rows = S;
            e.temporal_rows = T;
          }
          e.vocab = vocab;
          e.n_slots = n;
          e.hidden = hidden;
          e.x = ref.data();
          cpu::embed_assemble(e);

          DevBuf dtok = upload_ints(tokens), dpos = upload_ints(pos), drow = upload_ints(act_row),
                 dslots = upload_ints(act_slots), demb = upload(embed, t),
                 dps = upload(ps, DType::F32), dpt = upload(pt, DType::F32),
                 dact = upload(actions, DType::F32), dw0 = upload(w0, DType::F32),
                 db0 = upload(b0, DType::F32);
          DevBuf act_out(act.size() * 4), x(ref.size() * 4);
          act_out.poison();
          x.poison();
          in.actions = dact.as<float>();
          in.act_slots = dslots.as<int32_t>();
          in.w = dw0.as<float>();
          in.b = relu_bias ? db0.as<float>() : nullptr;
          in.out_t = t;
          in.out = act_out.get();
          LOOM_KERNEL(gpu::action_input_layer(in, nullptr));
          CHECK(rel_err(download(act_out, act.size(), t), act) < tolerance(t));
          e.t = t;
          e.tokens = dtok.as<int32_t>();
          e.positions = dpos.as<int32_t>();
          e.act_row = drow.as<int32_t>();
          e.embed = demb.get();
          e.act_out = act_out.get();
          if (frames) {
            e.pos_spatial = dps.as<float>();
            e.pos_temporal = dpt.as<float>();
          }
          e.x = x.as<float>();
          LOOM_KERNEL(gpu::embed_assemble(e, nullptr));
          CHECK(rel_err(download(x, ref.size(), DType::F32), ref) < tolerance(t));
        }
}
