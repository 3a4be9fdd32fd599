# Call 2 (session 41, one H200): the rank rule made the default where the mask's schedule brings
# its layouts. The forward's GPU tests that take it (through the whole API, the Mosaic backward
# after it), the new test asking for either rule where the other is the default, the bitwise
# tests, then random cases through the kernels (fuzz.py) with the time left.
set -x
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
timeout -s KILL 430 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu \
  packages/kvax-core/tests/test_mosaic.py -n 14 \
  -k "test_matches_reference or test_variants_match_reference or either_rule \
or document_chunks_bitwise or schedule_from_the_mask or deterministic_and_padding_exact \
or auto_picks or (document_chunks_match_reference and default)" \
  --kvax-report $OUT/h200-kvax-core-rank-rule.md 2>&1 | tail -15
echo "suite done at $SECONDS s"
if [ $SECONDS -lt 470 ]; then
  timeout -s KILL $((580 - SECONDS)) python3 tools/dev/fuzz.py variants --seeds 1000:1100 \
    --jobs 8 --time-limit $((540 - SECONDS)) 2>&1 | grep -v "^W0000\|^I0000" \
    | tee $OUT/2-fuzz.txt | tail -25
fi
