# Call 9 (prepared in session 46, not run: no device time left). apart.patch (each block mask
# and the document runs built from the layout behind a barrier of their own, so that XLA
# cannot merge the masks' sibling reductions into one multi-output fusion: the guess for the
# masks' slow LLVM module, `input_compare_reduce_fusion` in 6/masks-no-schedule's HLO, whose
# six reduce-windows come from different masks) against HEAD, in turns: the masks' compile with
# its longest LLVM modules, and cold first calls. On CPU the patched masks are bitwise HEAD's.
set -x
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
PATCH=docs/bench/h200-2026-11-28-compile/apart.patch
apply() { git apply "$@" $PATCH 2>/dev/null || patch -s -p1 "$@" < $PATCH; }
for i in 1 2; do
  for v in head patched; do
    [ $v = patched ] && apply
    grep -c "def apart" packages/kvax-core/src/kvax/_src/attention/mask.py | sed "s/^/$v apart: /"
    for part in masks masks-no-schedule; do
      timeout 60 python3 tools/dev/mask_compile.py --part $part --profile 2>&1 | sed "s/^/$v /"
    done
    timeout 100 python3 tools/first_call.py --doc-median 1100 --processes 1 --out /tmp/fc 2>&1 | tail -1 | sed "s/^/$v /"
    [ $v = patched ] && apply -R
  done
done > $OUT/9-log.txt
cat $OUT/9-log.txt
echo "at $SECONDS s"
