# Session 61, call 1 (one H200), at c5fb4b9: the launch layer's stage refit and the smaller tiles
# of 99 KiB GPUs, through the kernels on a GPU whose limit the test lowers to 101376 bytes; the
# Triton GPU tests near it (large blocks, head dims, the launch layer's own); beside them more
# mosaic fuzz seeds (from 900). Few files back: one log per job and the report.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
gpu_fuzz $OUT/1-mosaic.txt 470 mosaic --seeds 900:1300 --jobs 8 --time-limit 420 &
timeout -s INT 400 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu \
  packages/kvax-core/tests/test_attention.py packages/kvax-core/tests/test_triton_launch.py \
  -k "over_shared_memory or large_blocks or head_dims_with_device_defaults or triton_launch" \
  -n 6 --kvax-report $OUT/h200-shared-refit.md > $OUT/1-pytest.txt 2>&1
echo "pytest rc $?"; tail -3 $OUT/1-pytest.txt
wait; echo "done at $SECONDS s"
