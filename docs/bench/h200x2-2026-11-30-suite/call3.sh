# Session 55, call 3 (two H200s): kvax-dist's tests on the two GPUs, then whatever of kvax-core's
# GPU tests calls 1 and 2 did not reach (read from their reports in /tmp/gpu-state, which a
# warm machine keeps), then fresh `variants` fuzz seeds (from 6100) under the "1-key" check.
D=docs/bench/h200x2-2026-11-30-suite
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
timeout -s INT 200 python3 -m pytest -p kvax_testing.pytest_plugin packages/kvax-dist \
  --kvax-mesh-platform gpu -n 8 --kvax-report $OUT/h200x2-kvax-dist-suite.md \
  > $OUT/3-dist.txt 2>&1
echo "dist rc $?"; tail -2 $OUT/3-dist.txt; echo "at $SECONDS s"
python3 - "$D/tests-all.txt" /tmp/gpu-state/*.md > /tmp/left.txt <<'PY'
import re, sys
ran = set()
for path in sys.argv[2:]:
    ran |= set(re.findall(r"^\| `([^`]+)` \| (?:passed|failed|error)", open(path).read(), re.M))
print("\n".join(t for t in open(sys.argv[1]).read().split("\n") if t and t not in ran))
PY
echo "left: $(grep -c . /tmp/left.txt)"; cp /tmp/left.txt $OUT/3-left.txt
if [ -s /tmp/left.txt ]; then
  mapfile -t TESTS < /tmp/left.txt
  timeout -s INT $((420 - SECONDS)) python3 -m pytest -p kvax_testing.pytest_plugin -m gpu \
    "${TESTS[@]}" -n 30 --kvax-report $OUT/h200x2-kvax-core-suite-rest.md > $OUT/3-rest.txt 2>&1
  echo "rest rc $?"; tail -2 $OUT/3-rest.txt; echo "at $SECONDS s"
fi
timeout -s KILL $((540 - SECONDS)) python3 tools/dev/fuzz.py variants --seeds 6100:6300 \
  --jobs 24 --time-limit $((500 - SECONDS)) 2>&1 | grep -v "^W0000\|^I0000" \
  > $OUT/3-fuzz-variants.txt
echo "fuzz rc $?"; grep -c "^ok" $OUT/3-fuzz-variants.txt
grep -v "^ok" $OUT/3-fuzz-variants.txt | tail -8; echo "done at $SECONDS s"
