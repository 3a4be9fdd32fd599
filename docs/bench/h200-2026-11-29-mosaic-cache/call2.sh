# Call 2 (session 47, one H200): call 1's failed GPU test again (its child's JSON is now found
# among the lines Mosaic GPU's dumps print), a second jit of the same step in one process with
# the modules named by content and by Mosaic GPU's counter, in turns, then session 46's
# prepared call 9 (apart.patch: each block mask behind its own barrier) against HEAD.
set -x
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 200 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu packages/kvax-core/tests/test_mosaic_cache.py packages/kvax-core/tests/test_prewarm.py -n 4 --kvax-report $OUT/h200-kvax-core-mosaic-cache.md > $OUT/2-tests.txt 2>&1
echo "rc $?"; tail -3 $OUT/2-tests.txt
echo "at $SECONDS s"
for i in 1 2; do
  timeout 100 python3 tools/dev/second_jit.py --doc-median 1100
  timeout 100 python3 tools/dev/second_jit.py --doc-median 1100 --counter-names
done > $OUT/2-second-jit.txt 2>&1
cat $OUT/2-second-jit.txt
echo "at $SECONDS s"
PATCH=docs/bench/h200-2026-11-28-compile/apart.patch
apply() { git apply "$@" $PATCH 2>/dev/null || patch -s -p1 "$@" < $PATCH; }
for i in 1 2; do
  for v in head patched; do
    [ $v = patched ] && apply
    grep -c "def apart" packages/kvax-core/src/kvax/_src/attention/mask.py | sed "s/^/$v apart: /"
    timeout 60 python3 tools/dev/mask_compile.py --part masks --profile 2>&1 | sed "s/^/$v /"
    timeout 100 python3 tools/first_call.py --doc-median 1100 --processes 2 --out /tmp/fc 2>&1 | tail -2 | sed "s/^/$v /"
    [ $v = patched ] && apply -R
  done
done > $OUT/2-apart.txt 2>&1
cat $OUT/2-apart.txt
echo "at $SECONDS s"
