# Session 52, call 5 (prepared in session 51), before the trials' timing: the Mosaic backward's GPU
# tests at HEAD. e038680 moved the consumer's code out of its pl.when decorator into a call and
# f52bd33 passes an optional parity through the full steps; with the trials off (the default)
# the kernel does the same work, and its CPU tests pass, but no GPU has run it. 60 tests, about
# 6 minutes on one H200 (the report is written as each test ends).
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
timeout -s KILL 420 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu -n 14 \
  packages/kvax-core/tests/test_mosaic.py \
  -k "mosaic_backward or deterministic_and_padding_exact or each_further_layer" \
  --kvax-report $OUT/h200-kvax-core-bwd-after-trials.md > $OUT/bwd-tests.txt 2>&1
echo "rc $?"; grep -m2 "exit status\|totals" $OUT/h200-kvax-core-bwd-after-trials.md
