# Call 4 (session 50, one H200: no pair was lent any more): call 3's run of test_mosaic, test_long and
# test_mosaic_cache was killed at the call's limit before pytest wrote its report (the workers
# swallowed the interrupt); its log shows 127 passed and none failed, in collection order from
# the first. So this call runs the tests from the 121st on in reverse order (the last first),
# with the report written as each test ends (b8d4be5), as far as the device time left goes.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pytest -p kvax_testing.pytest_plugin -m gpu packages/kvax-core/tests/test_mosaic.py \
  packages/kvax-core/tests/test_long.py packages/kvax-core/tests/test_mosaic_cache.py \
  --collect-only -q 2>/dev/null | grep "::" > /tmp/all.txt
tail -n +121 /tmp/all.txt | tac > /tmp/rest.txt
echo "$(wc -l < /tmp/all.txt) collected, $(wc -l < /tmp/rest.txt) to run"
timeout -s KILL $((240 - SECONDS)) python3 -c "
import sys, pytest
ids = [line.rstrip('\n') for line in open('/tmp/rest.txt') if line.strip()]
sys.exit(pytest.main(['-p', 'kvax_testing.pytest_plugin', '-m', 'gpu', '-n', '14',
                      '--kvax-report', '$OUT/h200-kvax-core-mosaic-tail.md'] + ids))
" > $OUT/4-mosaic.txt 2>&1
echo "mosaic rc $?"; grep -m2 "exit status\|totals" $OUT/h200-kvax-core-mosaic-tail.md
echo "done at $SECONDS s"
