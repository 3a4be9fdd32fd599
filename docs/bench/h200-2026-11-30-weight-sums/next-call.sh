# For the next session (one H200, prepared in session 54): the five capped GPU tests that calls
# 2 and 3 did not reach (not-run-in-call3.txt), then the Mosaic kernels' GPU tests under
# check_attention's new default ("1-key": rows that see one key return its value bitwise, for
# 16-bit inputs without sinks), which no GPU has run, as far as the call's time goes, then
# fresh `variants` fuzz seeds (from 6100) under the same check. Later calls: the rest of
# test_mosaic, test_attention -m gpu, test_long.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mapfile -t TESTS < docs/bench/h200-2026-11-30-weight-sums/not-run-in-call3.txt
timeout -s INT 150 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu "${TESTS[@]}" -n 5 \
  --kvax-report $OUT/h200-kvax-core-capped-last.md > $OUT/n-capped.txt 2>&1
echo "capped rc $?"; tail -2 $OUT/n-capped.txt; echo "at $SECONDS s"
timeout -s INT $((420 - SECONDS)) python3 -m pytest -p kvax_testing.pytest_plugin -m gpu \
  packages/kvax-core/tests/test_mosaic.py -k "matches_reference and not cap" -n 14 \
  --kvax-report $OUT/h200-kvax-core-mosaic-one-key.md > $OUT/n-mosaic.txt 2>&1
echo "mosaic rc $?"; tail -2 $OUT/n-mosaic.txt; echo "at $SECONDS s"
timeout -s KILL $((580 - SECONDS)) python3 tools/dev/fuzz.py variants --seeds 6100:6200 \
  --jobs 12 --time-limit $((550 - SECONDS)) 2>&1 | grep -v "^W0000\|^I0000" \
  > $OUT/n-fuzz-variants.txt; echo "rc $?"; grep -c "^ok" $OUT/n-fuzz-variants.txt
grep "^FAIL" $OUT/n-fuzz-variants.txt | head; echo "done at $SECONDS s"
