# Call 3 (session 45, one H200): the CPU-interpreted kernel tests (forward and backward under
# jax's GPU interpret mode) on a machine whose default device is a GPU, as a user's full test
# run there would take them: mosaic_interpret.interpreted() runs them on the CPU device.
set -x
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv
timeout -s KILL 400 python3 -m pytest -p kvax_testing.pytest_plugin -n 6 \
  packages/kvax-core/tests/test_mosaic.py -k interpreted_on_cpu \
  --kvax-report $OUT/h200-kvax-core-interpreted.md 2>&1 | tail -15
echo "at $SECONDS s"
