#!/usr/bin/env bash
# One device call for the first-contact work (issue: wide ints, labels, first-call latency, traced
# scale): the kernel suite, ours at 64k with ~220 short documents under three id styles (and
# FlexAttention beside the shuffled ids), and cold/warm first calls. Logs and reports under $OUT.
# Usage on the GPU machine, from the repository root: bash tools/dev/gpu_first_contact.sh
set -u
source tools/gpu_env.sh || exit 1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
timeout 230 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu packages/kvax-core/tests -q \
    -n 4 --deselect packages/kvax-core/tests/test_long.py \
    --kvax-report $OUT/h100-kvax-core-kernels.md 2>&1 | tail -4
for ids in sequential shuffled large; do
  peers=""; [ $ids = shuffled ] && peers=flex
  timeout 120 python3 tools/bench.py mha --seq-lens 65536 --doc-median 190 --ids $ids \
      --num-pad-tokens 1000 --repeats 5 --peers "$peers" --out $OUT/labels-$ids \
      2>&1 | grep -v "^ *$" | tail -6
done
timeout 150 python3 tools/first_call.py --seq-len 65536 --num-segments 8 --out $OUT/first 2>&1
timeout 100 python3 tools/first_call.py --seq-len 65536 --num-segments 8 --jax-cache \
    --out $OUT/first 2>&1
