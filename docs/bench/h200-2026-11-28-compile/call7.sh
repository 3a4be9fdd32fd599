# Call 7 (session 46, one H200): barrier.patch (the doc runs' per-run arrays and the runs table
# materialized before the gathers that read them) against the code before it, in turns: the
# masks' compile with its longest LLVM modules (mask_compile.py, masks and masks-no-schedule),
# and cold first calls of the step (kernels compiled ahead), each in a fresh process.
set -x
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
PATCH=docs/bench/h200-2026-11-28-compile/barrier.patch
apply() { git apply "$@" $PATCH 2>/dev/null || patch -s -p1 "$@" < $PATCH; }
apply -R  # the code before the patch (the working tree came with it applied)
grep -c optimization_barrier packages/kvax-core/src/kvax/_src/attention/runs.py
for i in 1 2; do
  for v in before patched; do
    [ $v = patched ] && apply
    for part in masks masks-no-schedule; do
      timeout 60 python3 tools/dev/mask_compile.py --part $part --profile 2>&1 | sed "s/^/$v /"
    done
    timeout 100 python3 tools/first_call.py --doc-median 1100 --processes 1 --out /tmp/fc 2>&1 | tail -1 | sed "s/^/$v /"
    [ $v = patched ] && apply -R
  done
done > $OUT/7-log.txt
cat $OUT/7-log.txt
echo "at $SECONDS s"
