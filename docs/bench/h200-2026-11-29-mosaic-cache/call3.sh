# Call 3 (session 47, one H200): what apart.patch costs the masks at run time (call 2: their
# compile 4.0-4.4 -> 2.5-2.6 s, but the one timed second run 1.3-1.4 -> 1.7-1.9 ms): the
# median of 50 runs of create_attention_mask at 64k, HEAD and patched in turns, three times.
# Then, with the patch applied, the GPU tests: the Mosaic kernels on disk (the second process's
# test, its child's results now in a file), the cold step's kernels compiled ahead, 12 kernel
# tests.
set -x
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
PATCH=docs/bench/h200-2026-11-28-compile/apart.patch
apply() { git apply "$@" $PATCH 2>/dev/null || patch -s -p1 "$@" < $PATCH; }
for i in 1 2 3; do
  for v in head patched; do
    [ $v = patched ] && apply
    timeout 60 python3 tools/dev/mask_compile.py --part masks 2>&1 | sed "s/^/$v /"
    [ $v = patched ] && apply -R
  done
done > $OUT/3-apart-runs.txt 2>&1
cat $OUT/3-apart-runs.txt
echo "at $SECONDS s"
apply
grep -c "def apart" packages/kvax-core/src/kvax/_src/attention/mask.py
timeout 240 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu packages/kvax-core/tests/test_mosaic_cache.py packages/kvax-core/tests/test_prewarm.py packages/kvax-core/tests/test_mosaic.py -n 16 -k "second_process or cold_steps_kernels or test_matches_reference or deterministic_and_padding_exact or auto_picks" --kvax-report $OUT/h200-kvax-core-mosaic-cache.md > $OUT/3-tests.txt 2>&1
echo "rc $?"; tail -3 $OUT/3-tests.txt
echo "at $SECONDS s"
