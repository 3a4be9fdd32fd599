# Session 64, call 1 (one H200): the 17 GPU tests of the launch layer and of shared-memory fitting
# at 3333a18, which has session 63's mended tests (WAIT_S pinned where builds are counted) and
# fitted() taking the limit its caller read. Fuzz (variants, mosaic) beside them, a crowded host.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
gpu_fuzz $OUT/1-variants.txt 480 variants --seeds 12300:13300 --jobs 4 --time-limit 420 &
gpu_fuzz $OUT/1-mosaic.txt 480 mosaic --seeds 2600:3600 --jobs 3 --time-limit 420 &
timeout -s INT 540 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu \
  packages/kvax-core/tests/test_triton_launch.py packages/kvax-core/tests/test_attention.py \
  -k "test_triton_launch or shared_memory" -n 9 \
  --kvax-report $OUT/h200-kvax-core-launch-s64.md > $OUT/1-pytest.txt 2>&1
echo "pytest rc $?"; tail -n 3 $OUT/1-pytest.txt; echo "pytest done at $SECONDS s"
wait; echo "done at $SECONDS s"
