#!/bin/bash
# Session 75, second probe: the one-row GEMV on fewer SMs. The first probe (block-minor rows,
# bench/results/2026-12-07-h100-s75-gemv-rows-block-minor-not-kept.json) balanced qkv's and
# gate_up's rows over every SM and ran batch 1 3% slower: under programmatic dependent launch the
# next kernel's blocks land on an SM only when this kernel's block there exits, so the SMs that
# finish early (28 of qkv's 132 take a second row, 44 of gate_up's a sixth) are where the next
# GEMV streams its first weights before the boundary. o (2,048 rows) and down (2,048) have no such
# SMs: 128 blocks of 16 one-row warps end together. With rows_per_warp r the kernel runs on
# ⌈n / 16r⌉ blocks, leaving the rest of the SMs to the next kernel from its start (o at r 2: 64
# blocks, its 8 MB in flight all the same, one 4 KB row per buffer). The probe binary
# (bench/experiments/2026-12-07-gemv-rows-per-warp-probe-not-kept.patch: GemvArgs::rows_per_warp,
# set per family by LOOM_PROBE_RPW_<family>) runs loom bench batch 1 per setting.
# Predicted: o at 2 lets gate_up's first batch (4.4 MB on 68 SMs) land during o, gate_up −0.5 to
# −1 µs a layer, batch 1 −1 to −2%; down at 2 halves its bytes in flight (slower); qkv, gate_up
# at fewer blocks: unknown.
# Then nh (bench/experiments/2026-12-07-norm-weight-before-wait.patch): the RmsNorm kernel,
# which runs beside the GEMVs at 3-8 slots under PDL, reads its weight and row index before its
# wait instead of after (the same change as main's a7c72a2 for the batch-1 GEMV). Predicted:
# batch 8 −0.3 to −1%, batch 1 unchanged (no norm kernel there).
# Pack: .device/s2.txz from scripts/variant_build.sh -t "cuda_test_gemv cuda_test_norm
#   cuda_test_cuda_backend loom" -o .device/s2.txz main=main sp=<rows-per-warp patch> nh=<norm>
# (main = a7c72a2's GPU code, nwp in). carry: [".device/s2.txz"]. Everything comes back as
# $OUT/sp.tgz.
# Outcome (H100, bench/results/2026-12-07-h100-s75-gemv-rows-per-warp-norm-weight-b8.json): every
# r > 1 slower (o 2 +3.6%, o 3 +6.4%, down 2 +6.9%, gate_up 6 / 8 +1.6 / +4.8%, qkv 2 within
# 0.1%), not kept; nh batch 8 −1.0%, kept.
set -u
. scripts/device_env.sh
D=/tmp/sp; rm -rf $D; mkdir -p $D
unpack_pack .device/s2.txz .
sample_gpu $D
for vt in sp:cuda_test_gemv nh:cuda_test_norm nh:cuda_test_cuda_backend; do
  v=${vt%%:*} t=${vt#*:}
  timeout 200 .device/$v/bin/$t > "$D/${t}_$v.log" 2>&1
  echo "$v $t rc=$? at ${SECONDS}s"; grep -E "assertions" "$D/${t}_$v.log" | tail -1
done
[ -d /tmp/terra ] || python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra | tail -1
settings="main sp o2 o3 d2 q2 g6 g8"
for r in $(seq "${ROUNDS:-2}"); do
  for v in ${SETTINGS:-$settings}; do
    bin=.device/sp/bin/loom env=()
    case $v in
      main) bin=.device/main/bin/loom ;;
      o*) env=(LOOM_PROBE_RPW_gemv_o=${v#o}) ;;
      d*) env=(LOOM_PROBE_RPW_gemv_down=${v#d}) ;;
      q*) env=(LOOM_PROBE_RPW_gemv_qkv=${v#q}) ;;
      g*) env=(LOOM_PROBE_RPW_gemv_gate_up=${v#g}) ;;
    esac
    log=$D/bench_${v}_$r
    env "${env[@]}" timeout 100 $bin bench --model /tmp/terra --frames 8 --context-frames 3 \
      --batch-sizes 1 --json "$log.json" > "$log.log" 2>&1
    echo "$v r$r rc=$? at ${SECONDS}s $(grep -E '^ +1 ' "$log.log")"
  done
  tar czf "$OUT/sp.tgz" -C /tmp sp
done
for r in $(seq "${ROUNDS:-2}"); do
  for v in main nh; do
    log=$D/bench8_${v}_$r
    timeout 100 .device/$v/bin/loom bench --model /tmp/terra --frames 8 --context-frames 3 \
      --batch-sizes 8 --json "$log.json" > "$log.log" 2>&1
    echo "b8 $v r$r rc=$? at ${SECONDS}s $(grep -E '^ +8 ' "$log.log")"
  done
done
kill $smi 2>/dev/null
tar czf "$OUT/sp.tgz" -C /tmp sp
