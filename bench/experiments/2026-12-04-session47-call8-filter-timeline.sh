#!/bin/bash
# Session 47, call 8: where an fp32 top-p filter block's time goes (the timeline session 46's
# notes asked for). Carry .device/timeline.tgz: cuda_bench of 0fe135b with
# bench/experiments/2026-12-04-filter-timeline.patch (globaltimer stamps by thread 0 of each
# filter block after pdl_wait, after the xmax pass's reduction, the count pass, the split, the
# quanta's ends, the gathering pass, and at the end; its SM). `cuda_bench --only sampling`
# prints, for fp32 top-p alone at 256 rows, three calls' phase medians and maxima over the rows
# and the waves' starts and ends.
python3 -c "import tarfile; tarfile.open('.device/timeline.tgz').extractall()"
. scripts/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
build/bin/cuda_bench "$OUT/timeline.json" --only sampling > "$OUT/timeline.log" 2>&1
grep -A3 -E "^timeline|top-p 0.9 +f32.*256 rows" "$OUT/timeline.log"
