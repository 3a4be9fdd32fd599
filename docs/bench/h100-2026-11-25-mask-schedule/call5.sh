source tools/gpu_env.sh
date +%T
timeout -s INT 200 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu packages/kvax-core/tests/test_mosaic.py -n 8 -k "variants_match and S1000" --kvax-report $OUT/h100-kvax-core-mosaic-schedule-variants.md -q > $OUT/suite.txt 2>&1; echo "rc $?"
grep -E "passed|failed|error" $OUT/suite.txt | tail -3
date +%T
