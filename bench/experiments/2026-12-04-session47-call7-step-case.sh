#!/bin/bash
# Session 47, call 7: the rest of the 256-row FP8 decode step at full clock with 32 draw chunks
# (carry .device/s47b.txz, 37dc515's tests pack) against main (.device/s46e.tgz, 939e800's
# cuda_bench): `cuda_bench --step-case 256 8148 fp8`, base and new alternated twice. Predicted:
# the draw's share (0.10 ms) ~0.02-0.03 ms less (the benchmark sampler on bf16 logits, 220 ->
# 194 us alone), the rest of the step 1.87 -> ~1.85 ms.
python3 -c "import tarfile; tarfile.open('.device/s47b.txz').extractall()"
mkdir -p base && python3 -c "import tarfile; tarfile.open('.device/s46e.tgz').extractall('base')"
W=/tmp/s47_7; rm -rf "$W"; mkdir -p "$W"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$W/device.txt"
for r in 1 2; do
  for b in base new; do
    bin=build/bin/cuda_bench; [ $b = base ] && bin=base/build/bin/cuda_bench
    timeout 120 $bin "$W/$b$r.json" --step-case 256 8148 fp8 > "$W/$b$r.log" 2>&1
    echo "== $b$r rc=$?"; grep -iE "rest|without|whole|draw|lm_head" "$W/$b$r.log" | head -12
  done
done
tar czf "$OUT/s47_7.tgz" -C "$W" .
