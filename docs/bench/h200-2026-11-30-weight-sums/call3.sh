# Session 54, call 3 (one H200): the 20 capped GPU tests that call 2's time limit left
# (not-run-in-call2.txt, listed from its report against the same selection), at the same code.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mapfile -t TESTS < docs/bench/h200-2026-11-30-weight-sums/not-run-in-call2.txt
timeout -s INT 265 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu "${TESTS[@]}" -n 15 \
  --kvax-report $OUT/h200-kvax-core-capped-running-maxima-rest.md > $OUT/3-tests.txt 2>&1
echo "tests rc $?"; tail -3 $OUT/3-tests.txt; echo "done at $SECONDS s"
