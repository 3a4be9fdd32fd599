source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
D=docs/bench/h100-2026-11-28-verify
# 1. session 35's failing fuzz case (seed 477: Triton, bfloat16, cap 5, residual), rerun alone
#    with the kernels' declared logit error; then fresh seeds, 4 processes, beside the tests
(timeout -s INT 100 python3 tools/dev/fuzz.py variants --platform gpu --seeds 477:478 > $OUT/fuzz-477.txt 2>&1
 echo "fuzz 477 rc $?" >> $OUT/fuzz-477.txt
 timeout -s INT 420 python3 tools/dev/fuzz.py variants --platform gpu --seeds 600:720 --jobs 4 --time-limit 330 > $OUT/fuzz-variants.txt 2>&1
 echo "fuzz rc $?" >> $OUT/fuzz-variants.txt) &
# 2. every capped kernel test (Triton and Mosaic; they now pass the kernels' logit error)
timeout -s INT 500 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu packages/kvax-core/tests/test_mosaic.py packages/kvax-core/tests/test_attention.py -k cap -q -n 10 --kvax-report $OUT/h100-kvax-core-capped-logit-error.md > $OUT/tests.txt 2>&1; echo "tests rc $?"
tail -3 $OUT/tests.txt; date +%T
wait; tail -3 $OUT/fuzz-477.txt; tail -4 $OUT/fuzz-variants.txt; date +%T
