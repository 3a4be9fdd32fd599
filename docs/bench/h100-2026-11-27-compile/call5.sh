source tools/gpu_env.sh
mkdir -p $OUT/gpu
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
# cold processes primed by the same step at half the tokens: what a process pays once falls on
# the primed call, and the timed call's compile is its kernels' (and XLA's) own
F="python3 tools/first_call.py --doc-median 1100 --processes 1 --prime"
for c in "auto --forward-only" "auto" "triton"; do
  timeout -s INT 120 $F --backend $c --out $OUT/fc > $OUT/fc.txt 2>&1; echo "rc $? $c: $(tail -1 $OUT/fc.txt)"
done; date +%T
# the 4 tests of call 4's selection that its time did not reach
timeout -s INT 330 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu -n 4 -q \
  "packages/kvax-core/tests/test_mosaic.py::test_forward_schedule_from_the_mask_is_bitwise_the_built_one[mixed]" \
  "packages/kvax-core/tests/test_mosaic.py::test_packed_heads_forward_matches_reference[overlap-S1500-T1500-N4K2-H64-bfloat16-is_causal=False]" \
  "packages/kvax-core/tests/test_mosaic.py::test_packed_heads_forward_matches_reference[overlap-S2050-T2050-N8K2-H128-bfloat16-default]" \
  "packages/kvax-core/tests/test_mosaic.py::test_packed_heads_forward_matches_reference[plain-S1500-T1500-N4K2-H64-bfloat16-is_causal=False]" \
  --kvax-report $OUT/gpu/h100-kvax-core-mosaic-forward-loops-rest.md > $OUT/suite.txt 2>&1; echo "suite rc $?"; tail -3 $OUT/suite.txt; date +%T
