# Call 5 (session 46, one H200): which of the masks' parts XLA compiles slowly (each part in a
# fresh process, the three longest LLVM modules of each from jax's profiler), then the GPU tests
# of call 4 again for their report (test_prewarm's cold step and 12 kernel tests).
set -x
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 200 python3 tools/dev/mask_compile.py --part all --profile > $OUT/5-mask-compile.txt 2>&1
echo "rc $?"; cat $OUT/5-mask-compile.txt
timeout 280 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu packages/kvax-core/tests/test_prewarm.py packages/kvax-core/tests/test_mosaic.py -n 16 -k "cold_steps_kernels or test_matches_reference or deterministic_and_padding_exact or auto_picks" --kvax-report $OUT/h200-kvax-core-prewarm.md > $OUT/5-tests.txt 2>&1
echo "rc $?"; tail -3 $OUT/5-tests.txt
echo "at $SECONDS s"
