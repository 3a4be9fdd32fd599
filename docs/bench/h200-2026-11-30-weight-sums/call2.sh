# Session 54, call 2 (one H200): the fix as kept (16-bit inputs keep running row maxima under a
# soft cap; the fixed reference only for float32, whose P stays float32): every GPU test of the
# public API, the Mosaic kernels and kvax.nn that has a soft cap or the new one-key rows, then
# fuzz seed 5812 again and fresh `variants` seeds as far as the time goes.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout -s INT 400 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu \
  packages/kvax-core/tests/test_attention.py packages/kvax-core/tests/test_mosaic.py \
  packages/kvax-core/tests/test_nn.py -k "cap or one_key or soft" -n 12 \
  --kvax-report $OUT/h200-kvax-core-capped-running-maxima.md > $OUT/2-tests.txt 2>&1
echo "tests rc $?"; tail -3 $OUT/2-tests.txt; echo "at $SECONDS s"
timeout -s KILL 100 python3 tools/dev/fuzz.py variants --seeds 5812:5813 2>&1 \
  | grep -v "^W0000\|^I0000" > $OUT/2-fuzz-5812.txt; echo "rc $?"; cat $OUT/2-fuzz-5812.txt
timeout -s KILL $((570 - SECONDS)) python3 tools/dev/fuzz.py variants --seeds 5950:6100 \
  --jobs 12 --time-limit $((540 - SECONDS)) 2>&1 | grep -v "^W0000\|^I0000" \
  > $OUT/2-fuzz-variants.txt; echo "rc $?"; grep -c "^ok" $OUT/2-fuzz-variants.txt
grep "^FAIL" $OUT/2-fuzz-variants.txt | head; echo "done at $SECONDS s"
