# Session 58, call 1 (two H200s, 32 cores), code at 2aeeee5: the Mosaic forward's epilogue picks
# the fixed reference's one-key divisor in a plainer way (same values). Every GPU test of
# kvax-core that has a soft cap or checks one-key rows: session 57's 78 (tests-capped.txt, its
# 12 longest first, since those did not finish in session 57's first call).
D=docs/bench/h200x2-2026-11-30-epilogue
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date +%T
mapfile -t TESTS < $D/tests-capped.txt
timeout -s INT 540 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu "${TESTS[@]}" -n 30 \
  --kvax-report $OUT/h200x2-kvax-core-capped-epilogue.md > $OUT/1-tests.txt 2>&1
echo "tests rc $?"; tail -3 $OUT/1-tests.txt; echo "done at $SECONDS s"
