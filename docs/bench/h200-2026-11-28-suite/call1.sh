# Call 1 (session 40, H200): the whole Mosaic backward GPU suite and the nn entry points on the
# Mosaic backend (owed since 6d97be9, 9dc6748 and 8c3efc0); then, if time is left, clocks.py on
# log-normal documents with nvidia-smi's memory utilisation.
set -x
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
timeout -s KILL 470 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu \
  packages/kvax-core/tests/test_mosaic.py packages/kvax-core/tests/test_nn.py -n 14 \
  -k "mosaic_backward or (test_nn and mosaic)" \
  --kvax-report $OUT/h200-kvax-core-mosaic-backward.md 2>&1 | tail -15
echo "suite done at $SECONDS s"
if [ $SECONDS -lt 430 ]; then
  timeout -s KILL $((575 - SECONDS)) python3 tools/dev/clocks.py --layouts lognormal,docs8 \
    --rounds 3 --seconds 1.5 2>&1 | grep -v "^W0000\|^I0000" | tee $OUT/1-clocks.txt
fi
