source tools/gpu_env.sh
date +%T
timeout -s INT 575 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu packages/kvax-core/tests/test_mosaic.py packages/kvax-core/tests/test_nn.py -n 12 -k "mosaic_backward or (test_nn and mosaic) or overlapped or bitwise_the_built" --kvax-report $OUT/h100-kvax-core-mosaic-schedule-backward.md -q > $OUT/suite.txt 2>&1; echo "rc $?"
grep -E "passed|failed|error" $OUT/suite.txt | tail -3
date +%T
