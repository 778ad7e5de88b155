#!/bin/bash
# Session 59, call 1: (a) session 58's prepared trace of batch 8 (per op: busy, waits, staging)
# on main (v8 = c5b5ec3's cuda_bench and cuda_test_megakernel), and (b) v10 = main + the staged
# inputs written in their consumer's order: AttnReduce writes attn, FinalNorm h_last, and at 4-8
# slots GateUp (tiles of gate / up pairs) writes act = bf16(silu(g) · u), in the order OProj,
# LmHead and Down stage them, so each stages by one cp.async round trip (batch 8: OProj's and
# LmHead's copies took 4 dependent 16-byte loads a thread, Down's silu·mul 11 with two loads
# and 16 expf each).
# (c) v11 = v10 + the weight stream running on through attention at batch 8: AttnPartial's
# buffers (75,840 bytes) fit in the staged input's (90,112), dead between Qkv and OProj, yet
# the stream stopped at every AttnPartial with work, so the ~96 CTAs with a busy split a layer
# at ctx 600 began OProj with an empty ring. Predicted b8 a further -50..-150 us; b1 and b4
# unchanged (b1's buffers sit beside the ring; b4's 75,840 do not fit in its 45,056).
# Predictions: v10 b8 ctx 600 2,784 -> ~2,500 us (12 L2 round trips a layer fewer, ~1 us
# each, and the silu·mul no longer computed by every CTA); b1 -5..-20 us (OProj's and Down's
# staging one round trip each); bits: bf16 at 4-8 slots equal to the graph path within the
# bound as before, f32 exact.
# Binaries: .device/s58t.txz (f04cc34 tests pack), .device/v8.txz over it (main's cuda_bench,
# cuda_test_megakernel), .device/v10.txz and v11.txz (as cuda_bench_vN, cuda_test_megakernel_vN):
#   tar -cf - --transform "s,cuda_bench\$,cuda_bench_v10,;s,cuda_test_megakernel\$,cuda_test_megakernel_v10," \
#     build/bin/cuda_bench build/bin/cuda_test_megakernel | xz -T2 --lzma2=preset=6,dict=256MiB > .device/v10.txz
python3 -c "
import tarfile
for p in ('.device/s58t.txz', '.device/v8.txz', '.device/v10.txz', '.device/v11.txz'):
    tarfile.open(p).extractall()"
. scripts/device_env.sh
# Logs straight under $OUT (they come back even if the call is cut short); JSON in one tarball.
W=/tmp/s59_1; rm -rf "$W"; mkdir -p "$W"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
ln -sf cuda_bench build/bin/cuda_bench_v8
for v in v11 v10; do
  timeout 150 build/bin/cuda_test_megakernel_$v > "$OUT/test_$v.log" 2>&1
  echo "test $v rc=$?"; grep -E "TEST CASE|ERROR|assertions|Status" "$OUT/test_$v.log" | head -20
done
for r in 1 2; do
  for v in v8 v10 v11; do
    LOOM_BENCH_MEGA_SWEEPS=none timeout 100 build/bin/cuda_bench_$v "$W/${v}_$r.json" --megakernel > "$W/${v}_$r.log" 2>&1
    echo "== $v round $r rc=$?" | tee -a "$OUT/bench.log"
    grep -E "^(1|8) +[0-9]+ +(graph|mega)" "$W/${v}_$r.log" | tee -a "$OUT/bench.log"
  done
done
for v in v11 v8; do
  LOOM_BENCH_MEGA_SWEEPS=attn_min_keys_b8,attn_splits_b8 \
    LOOM_BENCH_MEGA_TRACE="8,600,0;8,600,3;1,600,0;1,600,3" \
    timeout 150 build/bin/cuda_bench_$v "$W/trace_$v.json" --megakernel > "$OUT/trace_$v.log" 2>&1
  echo "== trace $v rc=$?"; grep -E "^megakernel batch|^  [a-z]|\(batch" "$OUT/trace_$v.log"
done
tar czf "$OUT/s59_1_json.tgz" -C "$W" .
LOOM_TEST_MEGA_TIMEOUT_S=600 timeout 120 /usr/local/cuda/bin/compute-sanitizer --tool memcheck \
  --error-exitcode 1 build/bin/cuda_test_megakernel_v11 -tc="bf16 megakernel near the graph path*" \
  > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$?"; tail -5 "$OUT/memcheck.log"
