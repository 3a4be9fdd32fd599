source tools/gpu_env.sh
mkdir -p $OUT/gpu
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
T="python3 -m pytest -p kvax_testing.pytest_plugin -m gpu packages/kvax-core/tests/test_mosaic.py -k further_layer -q -s -n 2"
timeout -s INT 150 $T --kvax-report $OUT/gpu/h100-kvax-core-mosaic-layer-memory.md > $OUT/test-now.txt 2>&1; echo "now rc $?"; grep -E "further layers|passed|failed" $OUT/test-now.txt; date +%T
# the same test on the backward before the change (mosaic_bwd.py of a94c5d3, carried untracked as call7_old_mosaic_bwd.py, not committed): it must fail
cp call7_old_mosaic_bwd.py packages/kvax-core/src/kvax/_src/attention/mosaic_bwd.py
timeout -s INT 150 $T > $OUT/test-before-change.txt 2>&1; echo "before-change rc $?"; grep -E "further layers|passed|failed" $OUT/test-before-change.txt; date +%T
