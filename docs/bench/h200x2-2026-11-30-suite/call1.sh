# Session 55, call 1 (two H200s, 32 cores): the first half of kvax-core's 274 GPU tests at
# 97a9f86, under check_attention's "1-key" default (rows that see one key return its value
# bitwise, 16-bit inputs without sinks), which no GPU has run as a whole. The halves were split
# by each test's last reported time (tests-a.txt, tests-b.txt; longest first). The report is
# also kept in /tmp/gpu-state, for call 3 to run what calls 1 and 2 did not reach.
D=docs/bench/h200x2-2026-11-30-suite
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p /tmp/gpu-state
mapfile -t TESTS < $D/tests-a.txt
timeout -s INT $((560 - SECONDS)) python3 -m pytest -p kvax_testing.pytest_plugin -m gpu \
  "${TESTS[@]}" -n 30 --kvax-report $OUT/h200x2-kvax-core-suite-a.md > $OUT/1-pytest.txt 2>&1
echo "pytest rc $?"; tail -3 $OUT/1-pytest.txt
cp $OUT/h200x2-kvax-core-suite-a.md /tmp/gpu-state/
echo "done at $SECONDS s"
