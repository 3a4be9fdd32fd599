# Call 3 (session 41, the same H200, warm): call 2's suite was cut by its 430 s limit after 70 of
# 75 tests (all passing, no report written), so the same selection again with 16 workers and a
# longer limit: 75 passed, docs/gpu/h200-kvax-core-rank-rule.md.
source tools/gpu_env.sh >/dev/null 2>&1; timeout -s KILL 570 python3 -m pytest \
  -p kvax_testing.pytest_plugin -m gpu packages/kvax-core/tests/test_mosaic.py -n 16 \
  -k "test_matches_reference or test_variants_match_reference or either_rule \
or document_chunks_bitwise or schedule_from_the_mask or deterministic_and_padding_exact \
or auto_picks or (document_chunks_match_reference and default)" \
  --kvax-report $OUT/h200-kvax-core-rank-rule.md 2>&1 | grep -v Warning | tail -8
echo "done at $SECONDS s"
