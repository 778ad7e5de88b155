#!/bin/bash
# Session 61, call 11: OProj's and Down's x += dot as an atomic add whose result is unused
# (ATOMG to RZ: no return to wait for) instead of a .cg load and a store: one writer an element
# an op, so the same fp32 add, but the load's L2 round trip (~1.2 us while the weights stream)
# sat before every OProj / Down tile's publish, twice a layer on the chain. Against main
# (8455ffb's kernel) by scripts/mega_ab.sh.
# Predicted: b1 -25..-55 us, b8 likewise.
# Carry .device/s61x.txz (the change, tests) and .device/s61e.txz (main's kernel, tests pack).
bash scripts/mega_ab.sh .device/s61x.txz .device/s61e.txz none
