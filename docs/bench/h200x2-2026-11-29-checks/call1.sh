# Call 1 (session 50, 2 H200s): the checks owed since sessions 45 and 49. kvax-dist's GPU
# suite on the pair (not run since session 45's kernels), then the public API's and the launch
# layer's GPU tests on dd9caca (the custom_vjp called as it is under a trace) and 80e1bf0 (the
# launch layer's wait limit), which no GPU had run.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout -s INT 200 python3 -m pytest -p kvax_testing.pytest_plugin \
  packages/kvax-dist --kvax-mesh-platform gpu -q -n 8 \
  --kvax-report $OUT/h200x2-kvax-dist-one-trace.md > $OUT/1-dist.txt 2>&1
echo "dist rc $?"; tail -2 $OUT/1-dist.txt; echo "at $SECONDS s"
timeout -s INT $((585 - SECONDS)) python3 -m pytest -p kvax_testing.pytest_plugin -m gpu \
  packages/kvax-core/tests/test_attention.py packages/kvax-core/tests/test_nn.py \
  packages/kvax-core/tests/test_triton_launch.py -n 28 \
  --kvax-report $OUT/h200-kvax-core-api-one-trace.md > $OUT/1-core.txt 2>&1
echo "core rc $?"; tail -2 $OUT/1-core.txt; echo "done at $SECONDS s"
