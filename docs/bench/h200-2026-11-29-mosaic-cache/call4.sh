# Call 4 (session 47, one H200): the final code (apart.patch applied to mask.py). The GPU tests:
# the Mosaic kernels on disk (the second process's test now counts Mosaic GPU's compiles in
# jax's profiler, in place of call 3's PTX dumps, which this jax did not write), the cold
# step's kernels compiled ahead, 12 kernel tests; then first calls cold, warm and warm again,
# the default and the Triton kernels in turns.
set -x
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
grep -c "def apart" packages/kvax-core/src/kvax/_src/attention/mask.py
timeout 240 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu packages/kvax-core/tests/test_mosaic_cache.py packages/kvax-core/tests/test_prewarm.py packages/kvax-core/tests/test_mosaic.py -n 16 -k "second_process or cold_steps_kernels or test_matches_reference or deterministic_and_padding_exact or auto_picks" --kvax-report $OUT/h200-kvax-core-mosaic-cache.md > $OUT/4-tests.txt 2>&1
echo "rc $?"; tail -3 $OUT/4-tests.txt
echo "at $SECONDS s"
for b in auto triton; do
  timeout 150 python3 tools/first_call.py --doc-median 1100 --backend $b --out /tmp/fc 2>&1 | tail -3
done > $OUT/4-first-calls.txt
cat $OUT/4-first-calls.txt
echo "at $SECONDS s"
