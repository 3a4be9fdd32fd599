# Call 3 (session 49, one H200): the public API's GPU tests (test_attention, test_nn: both
# backends, forward and gradients) on the kernels built ahead (vjp.py lowers the Triton
# backward ahead), and first calls of the default (Mosaic) step, which builds no Triton kernel.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 150 python3 tools/first_call.py --doc-median 1100 --processes 2 --out /tmp/fc > $OUT/3-first-calls.txt 2>&1
tail -2 $OUT/3-first-calls.txt
echo "at $SECONDS s"
timeout 420 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu packages/kvax-core/tests/test_attention.py packages/kvax-core/tests/test_nn.py -n 14 --kvax-report $OUT/h200-kvax-core-api-after-ahead.md > $OUT/3-tests.txt 2>&1
echo "rc $?"; tail -4 $OUT/3-tests.txt
echo "at $SECONDS s"
