// The embed and positions families (kernels/embed.h, kernels/positions.h) on Terra's tables: a
// frame's 576 token slots through embed_assemble with the spatial + temporal tables (vocab
// 262,145, hidden 2048), and learned absolute positions added to the same slots.
#include "kernels/embed.cuh"
#include "bench.h"
#include "kernels/activation.cuh"
#include "kernels/positions.cuh"

namespace loom::bench {

nlohmann::json bench_embed(const Context& c) {
  nlohmann::json out = nlohmann::json::array();
  const int H = 2048, S = 582, T = 25, n = 576, rows = 2048;
  const int vocab = 262145;
  std::vector<int32_t> tokens(static_cast<size_t>(n)), positions(tokens.size()),
      act_row(tokens.size(), -1);
  for (int i = 0; i < n; i++) {
    tokens[size_t(i)] = (i * 7919 + 13) % vocab;
    positions[size_t(i)] = 3 * S + i;  // the fourth frame
  }
  for (DType t : {DType::BF16, DType::F32}) {
    Buffers d;
    void* embed = d.alloc(size_t(vocab) * H * dtype_size(t));
    LOOM_KERNEL(gpu::fill_uniform(t, embed, size_t(vocab) * H, 11, 1.0f, c.stream));
    const std::vector<float> ps = random_host(size_t(S) * H, 12),
                             pt = random_host(size_t(T) * H, 13);
    const std::string shape = std::to_string(n) + "x" + std::to_string(H);
    EmbedArgs e;
    e.t = t;
    e.tokens = d.upload_ints(tokens);
    e.positions = d.upload_ints(positions);
    e.act_row = d.upload_ints(act_row);
    e.embed = embed;
    e.pos_spatial = static_cast<const float*>(d.upload(ps, DType::F32));
    e.pos_temporal = static_cast<const float*>(d.upload(pt, DType::F32));
    e.frame_slots = S;
    e.spatial_rows = S;
    e.temporal_rows = T;
    e.vocab = vocab;
    e.n_slots = n;
    e.hidden = H;
    e.x = static_cast<float*>(d.alloc(size_t(n) * H * 4));
    auto launch = [&] { LOOM_KERNEL(gpu::embed_assemble(e, c.stream)); };
    launch();
    // Reference on the rows the slots read (the table itself is too large to copy each time).
    std::vector<float> rows_used(size_t(n) * H), x_ref(size_t(n) * H);
    for (int i = 0; i < n; i++) {
      const std::vector<float> r = d.download(
          static_cast<const char*>(embed) + size_t(tokens[size_t(i)]) * H * dtype_size(t), H, t);
      std::copy(r.begin(), r.end(), rows_used.begin() + long(i) * H);
    }
    std::vector<int32_t> local(tokens.size());
    for (int i = 0; i < n; i++) local[size_t(i)] = i;  // row i of rows_used
    EmbedArgs r = e;
    r.t = DType::F32;
    r.tokens = local.data();
    r.positions = positions.data();
    r.act_row = act_row.data();
    r.embed = rows_used.data();
    r.pos_spatial = ps.data();
    r.pos_temporal = pt.data();
    r.vocab = n;
    r.x = x_ref.data();
    cpu::embed_assemble(r);
    double err = rel_err(d.download(e.x, x_ref.size(), DType::F32), x_ref);
    // An embedding row and two position rows read, x written.
    double bytes = double(n) * H * (dtype_size(t) + 8 + 4);
    out.push_back(report(c, "embed_assemble", t, shape, time_us(c, launch), bytes, err));

    // Learned absolute positions on the same slots (OPT / GPT-2 style table of `rows` rows).
    const std::vector<float> table = random_host(size_t(rows) * H, 14);
    std::vector<int32_t> abs_pos(tokens.size());
    for (int i = 0; i < n; i++) abs_pos[size_t(i)] = (1000 + i) % (rows - 2);
    const PositionsArgs p{e.x,
                          d.upload_ints(abs_pos),
                          static_cast<const float*>(d.upload(table, DType::F32)),
                          2,
                          rows,
                          n,
                          H};
    LOOM_KERNEL(gpu::add_absolute_positions(p, c.stream));
    cpu::add_absolute_positions({x_ref.data(), abs_pos.data(), table.data(), 2, rows, n, H});
    err = rel_err(d.download(e.x, x_ref.size(), DType::F32), x_ref);
    auto add = [&] { LOOM_KERNEL(gpu::add_absolute_positions(p, c.stream)); };
    bytes = double(n) * H * 12;  // x read and written, a table row read
    if (t == DType::BF16)        // the op is fp32 only: time it once
      out.push_back(
          report(c, "add_absolute_positions", DType::F32, shape, time_us(c, add), bytes, err));
  }
  return out;
}

}  // namespace loom::bench
