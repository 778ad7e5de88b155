#!/bin/bash
# Session 46, call 5 (carry .device/s46c.tgz, call 4's change = ccc2e52, as the base, and
# .device/s46d.tgz, this change): fp32 top-p alone's count pass with z_of's branch taken once a
# pass and no id check in whole rounds, and its gathering pass testing each logit's order key
# against the draw's and the cut's quantum intervals (found by bisection; q is monotone in the
# key) instead of computing its quantum. ncu (call 3): the count pass ~27 instructions a logit
# and 39% of the filter's stalls, the gathering pass ~22 and 33%. Predicted: fp32 top-p 0.9
# alone 330 -> ~260-280 us at 256 rows; bf16 top-p unchanged or slightly faster (its gathering
# pass skips the id check in whole rounds); every other mode unchanged.
exec bash bench/experiments/2026-12-04-session46-sampling-ab.sh 5 .device/s46c.tgz .device/s46d.tgz
