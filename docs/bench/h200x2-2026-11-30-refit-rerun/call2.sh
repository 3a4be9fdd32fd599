# Session 62, call 2 (two H200s): the mended refit tests (Hopper's model set aside, the error
# test at 12288 bytes) and the launch layer keeping kernels by key and limit, with every Triton
# GPU test of test_attention.py and test_triton_launch.py in the same workers (so kernels built
# under the real limit are in memory when a refit test lowers it). Beside them sharded_mosaic
# fuzz from seed 18.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
gpu_fuzz $OUT/2-sharded_mosaic.txt 520 sharded_mosaic --platform gpu --seeds 18:200 \
  --time-limit 470 &
timeout -s INT 500 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu \
  packages/kvax-core/tests/test_attention.py packages/kvax-core/tests/test_triton_launch.py \
  -k "over_shared_memory or triton" \
  -n 14 --kvax-report $OUT/h200-refit-rerun-2.md > $OUT/2-pytest.txt 2>&1
echo "pytest rc $?"; tail -3 $OUT/2-pytest.txt
wait; echo "done at $SECONDS s"
