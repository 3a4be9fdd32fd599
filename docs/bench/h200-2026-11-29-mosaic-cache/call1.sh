# Call 1 (session 47, one H200): the Mosaic kernels named by their content and kept on disk
# (mosaic_cache.py). The GPU tests (a second process reads both kernels and compiles neither;
# the cold step's kernels compiled ahead; 12 kernel tests), then first calls in fresh processes,
# cold, warm and warm again (first_call.py's three), the default against the Triton kernels, in
# turns, twice.
set -x
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 240 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu packages/kvax-core/tests/test_mosaic_cache.py packages/kvax-core/tests/test_prewarm.py packages/kvax-core/tests/test_mosaic.py -n 16 -k "second_process or cold_steps_kernels or test_matches_reference or deterministic_and_padding_exact or auto_picks" --kvax-report $OUT/h200-kvax-core-mosaic-cache.md > $OUT/1-tests.txt 2>&1
echo "rc $?"; tail -3 $OUT/1-tests.txt
echo "at $SECONDS s"
for i in 1 2; do
  for b in auto triton; do
    timeout 150 python3 tools/first_call.py --doc-median 1100 --backend $b --out /tmp/fc-$i 2>&1 | tail -3
  done
done > $OUT/1-first-calls.txt
cat $OUT/1-first-calls.txt
echo "at $SECONDS s"
