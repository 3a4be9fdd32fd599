# Session 38. Apply first, on cfa1343's mosaic_bwd.py (next.patch plus abl=8, dq_wait and
# dq_store=3):
#   git apply docs/bench/h100-2026-11-28-bwd-dq-store/next3.patch
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; date +%T
# call 7 found the store path without its TMA add slower than with it: does dQ's store
# overlapping dK's product cost, and what do the fence and the add cost without the store?
timeout -s INT 500 python3 tools/dev/spike_det_bwd.py --layouts causal1,lognormal \
  --configs "mosaic det,mosaic nondet" --variant "dqwait0:dq_wait=0" \
  --variant "fenceadd:abl=8" --variant "addonly:abl=6" --variant "noadd:abl=5" \
  --variant "noadd_wait0:abl=5,dq_wait=0" --rounds 3 > $OUT/8-spike.txt 2>&1; echo "rc $?"
grep -v "^round" $OUT/8-spike.txt | tail -16; date +%T
