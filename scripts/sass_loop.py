#!/usr/bin/env python3
"""SASS instruction counts of a kernel's innermost loop holding its MMAs, to compare builds.

    scripts/sass_loop.py KERNEL_REGEX OBJ [OBJ2]

Runs `cuobjdump -sass` on each object (a CMake object such as
build/CMakeFiles/loom_cuda.dir/kernels/attention_tma.cu.o), takes the first function whose
mangled name matches KERNEL_REGEX (e.g. 'attention_tma_decode_kernelILb1ELi2ELi4ELb1ELb1E' for
the FP8 config-0 TMA kernel), finds the smallest backward-branch range holding at least 32 HMMAs
(the tile loop: a 64-key tile has 32), and prints its size; with two objects, the opcodes whose
counts differ. Static counts: a loop's cold branches count, and an unrolled loop holds several
tiles (divide by the HMMAs / 32). cuobjdump is not a project dependency: the CUDA toolkit's, or
PyPI's nvidia-cuda-cuobjdump wheel unpacked anywhere on PATH (bench/NOTES-cuda.md, session 41).
"""
import collections
import re
import subprocess
import sys


def function_sass(obj, regex):
    out = subprocess.run(["cuobjdump", "-sass", obj], capture_output=True, text=True,
                         check=True).stdout
    rows, on = [], False
    for line in out.splitlines():
        if "Function :" in line:
            if on:
                break
            on = re.search(regex, line) is not None
            continue
        m = re.match(r"\s+/\*([0-9a-f]{4,6})\*/\s+(.*?)\s*;?\s*(/\*.*)?$", line)
        if on and m:
            rows.append((int(m.group(1), 16), m.group(2).rstrip(" ;")))
    if not rows:
        sys.exit(f"{obj}: no function matches {regex}")
    return rows


def opcode(ins):
    return re.sub(r"^@!?U?P[0-9T] ", "", ins).split()[0]


def tile_loop(rows):
    best = None
    for addr, ins in rows:
        m = re.search(r"BRA.*0x([0-9a-f]+)", ins)
        if not m or int(m.group(1), 16) >= addr:
            continue
        body = [i for a, i in rows if int(m.group(1), 16) <= a <= addr]
        mmas = sum(opcode(i).startswith("HMMA") for i in body)
        if mmas >= 32 and (best is None or len(body) < len(best[1])):
            best = (mmas, body)
    if best is None:
        sys.exit("no backward branch holds 32 HMMAs")
    return best


def main(argv):
    if len(argv) not in (3, 4):
        sys.exit(__doc__)
    counts = []
    for obj in argv[2:]:
        mmas, body = tile_loop(function_sass(obj, argv[1]))
        print(f"{obj}: {len(body)} instructions, {mmas} HMMA ({len(body) * 32 / mmas:.0f} a tile)")
        counts.append(collections.Counter(opcode(i) for i in body))
    if len(counts) == 2:
        a, b = counts
        for op in sorted(set(a) | set(b), key=lambda o: b[o] - a[o]):
            if a[op] != b[op]:
                print(f"  {op:32s} {a[op]:5d} {b[op]:5d} {b[op] - a[op]:+d}")


if __name__ == "__main__":
    main(sys.argv)
