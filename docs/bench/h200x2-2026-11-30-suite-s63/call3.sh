# Session 63, call 3 (two H200s, call 1's machine): kvax-dist's tests on the two GPUs, then part 3
# of 3 of kvax-core's 298 GPU tests at 801af2e (tests-3.txt). The report is also kept in
# /tmp/gpu-state, for a later call to run what calls 1-3 did not reach.
D=docs/bench/h200x2-2026-11-30-suite-s63
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p /tmp/gpu-state
timeout -s INT 150 python3 -m pytest -p kvax_testing.pytest_plugin packages/kvax-dist \
  --kvax-mesh-platform gpu -n 8 --kvax-report $OUT/h200x2-kvax-dist-suite-s63.md \
  > $OUT/3-dist.txt 2>&1
echo "dist rc $?"; tail -n 1 $OUT/3-dist.txt; echo "at $SECONDS s"
mapfile -t TESTS < $D/tests-3.txt
timeout -s INT $((570 - SECONDS)) python3 -m pytest -p kvax_testing.pytest_plugin -m gpu \
  "${TESTS[@]}" -n 30 --kvax-report $OUT/h200x2-kvax-core-suite-s63-3.md > $OUT/3-pytest.txt 2>&1
echo "pytest rc $?"; tail -n 3 $OUT/3-pytest.txt
cp $OUT/h200x2-kvax-core-suite-s63-3.md /tmp/gpu-state/
echo "done at $SECONDS s"
