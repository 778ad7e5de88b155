#!/usr/bin/env python3
"""Power, SM clock and energy of timed windows, from an nvidia-smi log.

    nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,\\
      clocks_throttle_reasons.active --format=csv,noheader -lms 100 > smi.csv &
    scripts/power_windows.py smi.csv NAME=power.json [NAME=power.json ...]

Each JSON is `cuda_bench OUT --step-case B CTX … power`, `--gemm-rows-case M,… power` or
`--gemm-energy-case` output: its step_case / gemm_rows_case / gemm_energy_case rows carry
power_windows ({without or what, t0, t1, ms}, t0 / t1 in seconds since the epoch). Per window,
the median power and SM clock of the samples in [t0 + 1 s, t1], how many carry a clock event
(0x4: the board's power cap), and the median power times the replay's time: joules a replay.
Used by the device calls in bench/experiments/ (session 41 on); the log's timestamps are read as UTC.

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


def window(smi, t0, t1):
    """(median W, median SM MHz, samples with a clock event, samples) of [t0, t1]; None if empty."""
    s = [x for x in smi if t0 <= x[0] <= t1]
    if not s:
        return None
    watts = sorted(x[2] for x in s)[len(s) // 2]
    mhz = sorted(x[1] for x in s)[len(s) // 2]
    return watts, mhz, sum(x[3] != "0x0000000000000000" for x in s), len(s)


def bench_windows(smi, path):
    marks = [line.split() for line in open(path)]
    for a, b in zip(marks, marks[1:]):
        if a[1] != "bench":
            continue
        w = window(smi, float(a[3]) + 25, float(b[-1]))
        if not w:
            print(f"bench {a[2]}: no samples")
            continue
        print(f"bench {a[2]:6s} power median {w[0]:.0f} W  sm median {w[1]} MHz  "
              f"{w[2]}/{w[3]} capped")


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    smi = read_smi(argv[1])
    for arg in argv[2:]:
        name, _, path = arg.partition("=")
        if name == "marks":
            bench_windows(smi, path)
            continue
        j = json.load(open(path))
        rows = j.get("step_case", []) + j.get("gemm_rows_case", []) + j.get("gemm_energy_case", [])
        for row in rows:
            for pw in row.get("power_windows", []):
                what = "without " + pw["without"] if "without" in pw else pw["what"]
                w = window(smi, pw["t0"] + 1.0, pw["t1"])
                if not w:
                    print(f"{name} {what}: no samples")
                    continue
                print(f"{name:7s} {what:26s} {pw['ms']:7.3f} ms  {w[0]:4.0f} W  "
                      f"{w[1]} MHz  {w[2]}/{w[3]} capped  {w[0] * pw['ms'] / 1e3:.3f} J a replay")


if __name__ == "__main__":
    main(sys.argv)
