#!/usr/bin/env python3
"""Power, SM clock and energy of timed windows, from an nvidia-smi log.

    nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,\\
      clocks_throttle_reasons.active --format=csv,noheader -lms 100 > smi.csv &
    scripts/power_windows.py smi.csv NAME=power.json [NAME=power.json ...]

Each JSON is `cuda_bench OUT --step-case B CTX … power` output: its step_case rows carry
power_windows ({without, t0, t1, ms}, t0 / t1 in seconds since the epoch). Per window, the
median power and SM clock of the samples in [t0 + 1 s, t1], how many carry a clock event (0x4:
the board's power cap), and the median power times the replay's time: joules a replay. Used by
the device calls in bench/experiments/ (session 41 on); the log's timestamps are read as UTC.

An argument marks=FILE instead reads `loom bench` runs' windows from lines `--- bench NAME T`
closed by the next line's last field (`--- end T`), T in seconds since the epoch, and prints
each run's median power and SM clock past its first 25 s (the batch-1 latency row).
"""
import csv
import datetime
import json
import sys


def read_smi(path):
    rows = []
    for r in csv.reader(open(path)):
        try:
            t = datetime.datetime.strptime(r[0].strip(), "%Y/%m/%d %H:%M:%S.%f")
            t = t.replace(tzinfo=datetime.timezone.utc).timestamp()
            rows.append((t, int(r[1].split()[0]), float(r[3].split()[0]), r[5].strip()))
        except (ValueError, IndexError):
            pass  # the header, or a line cut short when the logger was killed
    return rows


def bench_windows(smi, path):
    marks = [line.split() for line in open(path)]
    for a, b in zip(marks, marks[1:]):
        if a[1] != "bench":
            continue
        s = [x for x in smi if float(a[3]) + 25 <= x[0] <= float(b[-1])]
        if not s:
            print(f"bench {a[2]}: no samples")
            continue
        watts = sorted(x[2] for x in s)[len(s) // 2]
        mhz = sorted(x[1] for x in s)[len(s) // 2]
        capped = sum(x[3] != "0x0000000000000000" for x in s)
        print(f"bench {a[2]:6s} power median {watts:.0f} W  sm median {mhz} MHz  "
              f"{capped}/{len(s)} capped")


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    smi = read_smi(argv[1])
    for arg in argv[2:]:
        name, _, path = arg.partition("=")
        if name == "marks":
            bench_windows(smi, path)
            continue
        for row in json.load(open(path))["step_case"]:
            for w in row.get("power_windows", []):
                s = [x for x in smi if w["t0"] + 1.0 <= x[0] <= w["t1"]]
                if not s:
                    print(f"{name} without {w['without']}: no samples")
                    continue
                watts = sorted(x[2] for x in s)[len(s) // 2]
                mhz = sorted(x[1] for x in s)[len(s) // 2]
                capped = sum(x[3] != "0x0000000000000000" for x in s)
                print(f"{name:7s} without {w['without']:18s} {w['ms']:7.3f} ms  {watts:4.0f} W  "
                      f"{mhz} MHz  {capped}/{len(s)} capped  {watts * w['ms'] / 1e3:.2f} J a replay")


if __name__ == "__main__":
    main(sys.argv)
