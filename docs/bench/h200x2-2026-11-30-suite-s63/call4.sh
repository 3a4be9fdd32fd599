# Session 63, call 4 (two H200s, calls 1-3's machine): whatever of kvax-core's 298 GPU tests calls
# 1-3 did not reach (found from their reports in /tmp/gpu-state, which a warm machine keeps), then
# fresh fuzz seeds beside it for the rest of the call: sharded_mosaic from 33, mosaic from 2600,
# variants from 11300. LIMIT (seconds, default 400) is the call's length.
D=docs/bench/h200x2-2026-11-30-suite-s63
LIMIT=${LIMIT:-400}
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
cat $D/tests-[123].txt > /tmp/all.txt
python3 - /tmp/all.txt /tmp/gpu-state/*.md > /tmp/left.txt <<'PY'
import re, sys
ran = set()
for path in sys.argv[2:]:
    ran |= set(re.findall(r"^\| `([^`]+)` \| (?:passed|failed|error)", open(path).read(), re.M))
print("\n".join(t for t in open(sys.argv[1]).read().split("\n") if t and t not in ran))
PY
echo "left: $(grep -c . /tmp/left.txt)"; cp /tmp/left.txt $OUT/4-left.txt
if [ -s /tmp/left.txt ]; then
  mapfile -t TESTS < /tmp/left.txt
  timeout -s INT $((LIMIT - 40 - SECONDS)) python3 -m pytest -p kvax_testing.pytest_plugin \
    -m gpu "${TESTS[@]}" -n 24 --kvax-report $OUT/h200x2-kvax-core-suite-s63-rest.md \
    > $OUT/4-rest.txt 2>&1 &
fi
F=$((LIMIT - 40 - SECONDS))
gpu_fuzz $OUT/4-sharded_mosaic.txt $F sharded_mosaic --platform gpu --seeds 33:200 \
  --time-limit $((F - 40)) &
gpu_fuzz $OUT/4-mosaic.txt $F mosaic --seeds 2600:3600 --jobs 3 --time-limit $((F - 40)) &
gpu_fuzz $OUT/4-variants.txt $F variants --seeds 11300:12300 --jobs 4 --time-limit $((F - 40)) &
wait; echo "rest: $(tail -n 1 $OUT/4-rest.txt 2>/dev/null)"; echo "done at $SECONDS s"
