source tools/gpu_env.sh
mkdir -p $OUT/gpu
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
# the backward's loops moved into head_steps: its other shapes (query-head groups), padding and
# dK/dV bitwise reruns, and a further layer's memory
timeout -s INT 250 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu packages/kvax-core/tests/test_mosaic.py -k "mosaic_backward_other_shapes or padding_exact_and_dkdv or further_layer" -n 9 -q --kvax-report $OUT/gpu/h100-kvax-core-mosaic-backward-head-steps.md > $OUT/suite.txt 2>&1; echo "suite rc $?"; tail -3 $OUT/suite.txt; date +%T
