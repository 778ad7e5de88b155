#!/bin/bash
bash bench/experiments/2026-12-03-session41-call-e4m3-probe.sh
bash bench/experiments/2026-12-03-session41-call-ncu-fp8-pipes.sh
