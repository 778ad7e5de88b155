#!/bin/bash
# Session 75: the one-row GEMV's rows given to warps block-minor
# (bench/experiments/2026-12-07-gemv-rows-block-minor-not-kept.patch). Today warp w of block b takes rows
# 16 b + w + j · 2,112, so where a matrix's rows do not divide evenly over the 2,112 warps the
# warps with a row more are whole blocks: qkv (2,560 rows) gives 28 SMs 32 rows and 104 SMs 16,
# gate_up (11,264) 44 SMs 96 rows a warp-set of 6 and 88 SMs 80, lm_head 17 SMs one more row a
# warp. Block-minor puts the extra rows on every SM (qkv 19-20 rows an SM, gate_up 85-86). Each
# row's arithmetic is unchanged (same bits). Predicted: qkv and gate_up shed part of their tail,
# the 88-GEMV chain −0.5 to −2%, loom bench batch 1 −0.3 to −1%.
# Beside it, nwp (bench/experiments/2026-12-07-gemv-norm-weight-before-wait.patch): batch 1's
# RmsNorm weight copied into shared memory by cp.async before the PDL wait, where today it is
# read after the staging's block sum, an HBM round trip on the critical path of qkv and gate_up
# (44 kernels a step; the weights' stream evicts it from L2 every step). ptxas: the RmsNorm
# one-row kernels 120 → 124 registers, the beside-attention ones 88, 0 spills. Predicted: −0.3
# to −0.8 µs a kernel, batch 1 −1 to −2.5%. bn: both.
# Pack: .device/bal.txz from scripts/variant_build.sh -t "cuda_bench cuda_test_gemv
#   cuda_test_cuda_backend loom" -o .device/bal.txz main=main bal=<patch> nwp=<patch> bn=<both>
# carry: [".device/bal.txz"]
# Order: cuda_test_gemv of bal, nwp and bn and bn's cuda_test_cuda_backend, then cuda_bench's
# GEMV rates and chain and loom bench batch 1 over 8 frames, each alternated over VARIANTS
# (default "main bal nwp bn") ROUNDS times (default 2). Everything comes back as $OUT/bal.tgz.
# Outcome (H100, bench/results/2026-12-07-h100-s75-gemv-rows-block-minor-norm-weight.json): bal
# +3.1% at batch 1 (the chain +6.5%; qkv faster alone, slower under PDL), not kept; nwp −0.7%,
# kept (a7c72a2); bn as bal.
set -u
. scripts/device_env.sh
D=/tmp/bal; rm -rf $D; mkdir -p $D  # a warm machine keeps /tmp: loom bench refuses an existing --json
unpack_pack .device/bal.txz .
sample_gpu $D
for vt in bal:cuda_test_gemv nwp:cuda_test_gemv bn:cuda_test_gemv bn:cuda_test_cuda_backend; do
  v=${vt%%:*} t=${vt#*:}
  timeout 200 .device/$v/bin/$t > "$D/${t}_$v.log" 2>&1
  echo "$v $t rc=$? at ${SECONDS}s"; grep -E "test cases|assertions|skip" "$D/${t}_$v.log" | tail -2
done
for r in $(seq "${ROUNDS:-2}"); do
  for v in ${VARIANTS:-main bal nwp bn}; do
    timeout 90 .device/$v/bin/cuda_bench "$D/gemv_${v}_$r.json" --only gemv_vs_cublas,gemv_chain \
      > "$D/gemv_${v}_$r.log" 2>&1
    echo "$v r$r rc=$? at ${SECONDS}s"; grep -iE "chain|2560|11264" "$D/gemv_${v}_$r.log" | head -4
  done
done
python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra | tail -1
for r in $(seq "${ROUNDS:-2}"); do
  for v in ${VARIANTS:-main bal nwp bn}; do
    log=$D/bench_${v}_$r
    timeout 120 .device/$v/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 \
      --batch-sizes "${BATCHES:-1}" --json "$log.json" > "$log.log" 2>&1
    echo "$v r$r rc=$? at ${SECONDS}s"; grep -E "^ +[18] " "$log.log"
  done
  tar czf "$OUT/bal.tgz" -C /tmp bal
done
kill $smi 2>/dev/null
tar czf "$OUT/bal.tgz" -C /tmp bal
