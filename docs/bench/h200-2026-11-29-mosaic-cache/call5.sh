# Call 5 (session 47, one H200): with the kernels' lowering kept too (mosaic_cache.cache_lowering:
# Pallas's module for each kernel, in memory and on disk). The GPU tests of call 4 at this code,
# then first calls cold, warm and warm again (the default and the Triton kernels in turns), and a
# second jit of the same step in one process with kvax's hooks and without them (as before).
set -x
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 240 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu packages/kvax-core/tests/test_mosaic_cache.py packages/kvax-core/tests/test_prewarm.py packages/kvax-core/tests/test_mosaic.py -n 16 -k "second_process or cold_steps_kernels or test_matches_reference or deterministic_and_padding_exact or auto_picks" --kvax-report $OUT/h200-kvax-core-mosaic-cache.md > $OUT/5-tests.txt 2>&1
echo "rc $?"; tail -3 $OUT/5-tests.txt
echo "at $SECONDS s"
for b in auto triton; do
  timeout 150 python3 tools/first_call.py --doc-median 1100 --backend $b --out /tmp/fc 2>&1 | tail -3
done > $OUT/5-first-calls.txt
cat $OUT/5-first-calls.txt
echo "at $SECONDS s"
for v in "" --as-before; do
  timeout 100 python3 tools/dev/second_jit.py --doc-median 1100 $v 2>&1 | tail -2
done > $OUT/5-second-jit.txt
cat $OUT/5-second-jit.txt
echo "at $SECONDS s"
