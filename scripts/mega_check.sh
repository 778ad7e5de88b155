#!/usr/bin/env bash
# The decode-step megakernel on the GPU machine (issue 15), after `scripts/pack_device.sh tests`:
#   scripts/mega_check.sh tests   its CUDA suite, then every CUDA suite (ctest -L cuda)
#   scripts/mega_check.sh sanitize  compute-sanitizer memcheck, synccheck (tiny models, and a
#                                 head_dim-64 model at 1-8 slots), initcheck (tiny models);
#                                 SANITIZE_TOOLS picks some (default "memcheck synccheck
#                                 initcheck"; initcheck alone takes up to ~400 s), SANITIZE_CASES
#                                 memcheck's and synccheck's test cases (doctest -tc)
#   scripts/mega_check.sh trace   cuda_bench --megakernel: megakernel vs graph path, per-op trace,
#                                 the critical path of its raw timelines (scripts/mega_timeline.py;
#                                 LOOM_BENCH_MEGA_SWEEPS / LOOM_BENCH_MEGA_TRACE pick sweeps, traces)
#   scripts/mega_check.sh ncu     Nsight Compute on one batch-1 megakernel step of cuda_bench
#                                 (throughput, memory, warp stalls, source counters)
#   scripts/mega_check.sh bench   loom bench on a Terra-size v1 checkpoint (/tmp/terra, made on
#                                 the fly), 8 frames after 3 context frames, batches 1 and 8:
#                                 the graph path and the megakernel (--megakernel) in one call;
#                                 with HF=1 also HF transformers on the same checkpoint, eager
#                                 at batch 1 and 8 and torch.compile (static cache) at batch 1
#                                 (scripts/hf_bench.py; ~4-5 minutes more)
# Writes logs and JSON under $OUT. BUILD: the build folder (default build).
set -uo pipefail
what=${1:-tests}
OUT=${OUT:-$PWD/out-mega}
B=${BUILD:-build}/bin
mkdir -p "$OUT"
. scripts/device_env.sh
rc=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"

if [ "$what" = tests ]; then
  timeout 300 "$B/cuda_test_megakernel" 2>&1 | tee "$OUT/test_megakernel.log" | tail -5 || rc=1
  (cd "${BUILD:-build}" && timeout 500 ctest -L cuda --output-on-failure) 2>&1 |
    tee "$OUT/ctest_cuda.log" | tail -25 || rc=1
fi

if [ "$what" = sanitize ]; then
  # compute-sanitizer's memcheck, synccheck and initcheck on the tiny checkpoints (racecheck
  # sees shared memory only), on the megakernel's launches only (the graph path's kernels in
  # the same test have their own suites; instrumenting them too took initcheck past 200 s);
  # where the toolkit has no sanitizer, say so.
  cs=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
  if [ -z "$cs" ]; then
    echo "no compute-sanitizer on this machine" | tee "$OUT/sanitize.log"
  else
    # The bounded wait is lengthened (LOOM_TEST_MEGA_TIMEOUT_S): instrumented steps are slow.
    tools=" ${SANITIZE_TOOLS:-memcheck synccheck initcheck} "
    for tool in memcheck synccheck; do
      [[ $tools == *" $tool "* ]] || continue
      LOOM_TEST_MEGA_TIMEOUT_S=120 timeout 300 "$cs" --tool $tool --kernel-name kns=megakernel \
        --error-exitcode 3 "$B/cuda_test_megakernel" \
        -tc="${SANITIZE_CASES:-bf16 megakernel stays*,bf16 megakernel near the graph path*}" 2>&1 |
        tee "$OUT/sanitize_$tool.log" | tail -4 || rc=1
    done
    # initcheck instruments every kernel (what the graph path's prompt steps write into the KV
    # cache is then seen as written) on the f32 case, leaving out host API copies (-api: the
    # logits' download); restricted to the megakernel it reads the cache as uninitialised.
    [[ $tools == *" initcheck "* ]] &&
      { LOOM_TEST_MEGA_TIMEOUT_S=120 timeout 400 "$cs" --tool initcheck \
        --check-api-memory-access no --error-exitcode 3 "$B/cuda_test_megakernel" \
        -tc="f32 megakernel equals the CPU*" 2>&1 | tee "$OUT/sanitize_initcheck.log" |
        tail -4 || rc=1; }
  fi
fi

if [ "$what" = trace ]; then
  timeout 300 "$B/cuda_bench" "$OUT/cuda_bench_megakernel.json" --megakernel 2>&1 |
    tee "$OUT/cuda_bench_megakernel.log" | tail -60 || rc=1
  python3 scripts/mega_timeline.py "$OUT/cuda_bench_megakernel.json" | tee "$OUT/timeline.txt" ||
    rc=1
fi

if [ "$what" = ncu ]; then
  ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
  if [ -z "$ncu" ]; then
    echo "no ncu on this machine" | tee "$OUT/ncu.log"
  else
    timeout 500 "$ncu" --kernel-name regex:megakernel --launch-skip 20 --launch-count 1 \
      --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis \
      --section WarpStateStats --section SchedulerStats --section InstructionStats \
      --section SourceCounters \
      --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
      "$B/cuda_bench" "$OUT/ncu_bench.json" --megakernel 2>&1 | grep -v "^==PROF==" |
      tee "$OUT/ncu.log" | tail -150 || rc=1
  fi
fi

if [ "$what" = bench ]; then
  [ -d /tmp/terra ] || python3 scripts/make_checkpoint.py --variant v1 --out /tmp/terra | tail -1
  for mode in graph mega; do
    extra=""
    [ $mode = mega ] && extra=--megakernel
    "$B/loom" bench --model /tmp/terra --frames "${FRAMES:-8}" --context-frames 3 \
      --batch-sizes "${BATCHES:-1,8}" ${PROFILE:+--profile} $extra \
      --json "$OUT/bench_$mode.json" 2>&1 | tee "$OUT/bench_$mode.log" | tail -6 || rc=1
  done
  if [ "${HF:-0}" = 1 ]; then
    for run in "eager 1 2" "eager 8 1" "compile 1 3"; do
      set -- $run
      timeout 300 python3 scripts/hf_bench.py --model /tmp/terra --mode "$1" --batch "$2" \
        --frames "$3" --json "$OUT/hf_$1_b$2.json" 2>&1 | tail -3 || rc=1  # (8 files come back)
    done
  fi
fi
exit $rc
