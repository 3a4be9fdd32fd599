# Session 63, call 1 (two H200s, 32 cores): part 1 of 3 of kvax-core's 298 GPU tests at 801af2e,
# the first whole run since session 55 (97a9f86). Parts split by tools/dev/split_gpu_suite.py from
# each test's latest reported time (tests-1.txt, longest first). The report is also kept in
# /tmp/gpu-state, for a later call to run what this one did not reach.
D=docs/bench/h200x2-2026-11-30-suite-s63
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p /tmp/gpu-state
mapfile -t TESTS < $D/tests-1.txt
timeout -s INT $((560 - SECONDS)) python3 -m pytest -p kvax_testing.pytest_plugin -m gpu \
  "${TESTS[@]}" -n 30 --kvax-report $OUT/h200x2-kvax-core-suite-s63-1.md > $OUT/1-pytest.txt 2>&1
echo "pytest rc $?"; tail -n 3 $OUT/1-pytest.txt
cp $OUT/h200x2-kvax-core-suite-s63-1.md /tmp/gpu-state/
echo "done at $SECONDS s"
