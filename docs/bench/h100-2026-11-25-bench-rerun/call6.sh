source tools/gpu_env.sh
mkdir -p $OUT/gpu
date +%T
timeout -s INT 570 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu packages/kvax-core/tests/test_mosaic.py packages/kvax-core/tests/test_nn.py -n 12 -k "mosaic_backward or (test_nn and mosaic) or overlapped" --kvax-report $OUT/gpu/h100-kvax-core-mosaic-work-scan-backward.md -q 2>&1 | tail -4
date +%T
