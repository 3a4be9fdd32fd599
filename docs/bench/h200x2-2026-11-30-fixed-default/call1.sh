# Session 57, call 1 (two H200s, 32 cores), code at a4246ed: MosaicConfig.fixed_reference is the
# default for soft-capped bfloat16 (no row maxima; one-key rows divided by their rounded weight).
# Every GPU test of kvax-core that has a soft cap or checks one-key rows (tests-capped.txt: the
# 78 that `-k "cap or one_key or soft"` selects in test_attention, test_mosaic and test_nn), then
# `variants` fuzz from seed 6700 (random variants, caps among them) while the time lasts.
D=docs/bench/h200x2-2026-11-30-fixed-default
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date +%T
mapfile -t TESTS < $D/tests-capped.txt
timeout -s INT 330 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu "${TESTS[@]}" -n 30 \
  --kvax-report $OUT/h200x2-kvax-core-capped-fixed-default.md > $OUT/1-tests.txt 2>&1
echo "tests rc $?"; tail -3 $OUT/1-tests.txt; echo "at $SECONDS s"
timeout -s KILL $((550 - SECONDS)) python3 tools/dev/fuzz.py variants --seeds 6700:6900 \
  --jobs 24 --time-limit $((500 - SECONDS)) 2>&1 | grep -v "^W0000\|^I0000" \
  > $OUT/1-fuzz-variants.txt
echo "fuzz rc $?"; grep -c "^ok" $OUT/1-fuzz-variants.txt
grep -v "^ok" $OUT/1-fuzz-variants.txt | tail -8; echo "done at $SECONDS s"
