# Prepared in session 56, not yet run (one H200 or H100): MosaicConfig.fixed_reference, the
# soft-capped bfloat16 forward without row maxima (c588aef). First its GPU tests (through the
# whole API, logits near +-c, sinks with a window, one-key rows bitwise at caps 5, 30 and 50)
# and the default's one-key tests beside them; then its cost against the default's running
# maxima on log-normal documents, 64k, 8 chained calls, as session 54's call 1
# (../h200-2026-11-30-weight-sums/).
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader; date +%T
timeout -s INT 200 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu \
  packages/kvax-core/tests/test_mosaic.py -k "fixed_reference or one_key" -n 8 \
  --kvax-report $OUT/h200-kvax-core-fixed-reference.md > $OUT/1-tests.txt 2>&1
echo "tests rc $?"; tail -3 $OUT/1-tests.txt; date +%T
timeout -s INT $((560 - SECONDS)) python3 tools/dev/spike_softcap.py --doc-median 1100 \
  --layers 8 --fixed --rounds 10 --repeats 1 > $OUT/1-lognormal.txt 2>&1
echo "rc $?"; tail -5 $OUT/1-lognormal.txt; date +%T
