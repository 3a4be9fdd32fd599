# Session 62, call 1 (two H200s), at e28af77. Session 61's changes that never ran on a GPU (8 KiB
# tiles, the too-large error's advice, the table's fallback, the launch layer's refactor): its
# refit and error tests again, with test_triton_launch's GPU tests. Beside them the first
# `sharded_mosaic` cases since session 60 (from seed 4) and `variants` from seed 9300.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader; git log -1 --format=%h 2>/dev/null; date +%T
gpu_fuzz $OUT/1-sharded_mosaic.txt 540 sharded_mosaic --platform gpu --seeds 4:200 \
  --time-limit 490 &
gpu_fuzz $OUT/1-variants.txt 540 variants --seeds 9300:10300 --jobs 8 --time-limit 480 &
timeout -s INT 400 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu \
  packages/kvax-core/tests/test_attention.py packages/kvax-core/tests/test_triton_launch.py \
  -k "over_shared_memory or test_triton_launch" \
  -n 6 --kvax-report $OUT/h200-refit-rerun.md > $OUT/1-pytest.txt 2>&1
echo "pytest rc $?"; tail -3 $OUT/1-pytest.txt
wait; echo "done at $SECONDS s"
