#!/bin/bash
# Session 62, call 9: loom bench on a Terra-size v1 checkpoint made on the fly, 8 frames after 3
# context frames, batches 1 and 8, the graph path and --megakernel (scripts/mega_check.sh bench)
# on main 5d461e7's build (.device/s62z.txz). The end-to-end figure issue 15's targets are in
# (s/frame against the floor); last measured for the megakernel in session 52 (H200).
python3 -c "import tarfile; tarfile.open('.device/s62z.txz').extractall()"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/device.txt"
timeout 330 bash scripts/mega_check.sh bench; echo "bench rc=$?"
