# Call 8 (session 46, one H200): the GPU tests of calls 4-5 at the final prewarm.py (the thread
# clears itself as it stops): the cold step's kernels compiled ahead, and 12 kernel tests.
set -x
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 200 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu packages/kvax-core/tests/test_prewarm.py packages/kvax-core/tests/test_mosaic.py -n 16 -k "cold_steps_kernels or test_matches_reference or deterministic_and_padding_exact or auto_picks" --kvax-report $OUT/h200-kvax-core-prewarm.md > $OUT/8-tests.txt 2>&1
echo "rc $?"; tail -3 $OUT/8-tests.txt
echo "at $SECONDS s"
