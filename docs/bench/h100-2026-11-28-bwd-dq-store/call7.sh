# NOT RUN (session 37's device time ran out). Apply first, on this commit's mosaic_bwd.py:
#   git apply docs/bench/h100-2026-11-28-bwd-dq-store/next.patch
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; date +%T
# three ablations of dQ's store path (wrong results, timing only)
timeout -s INT 300 python3 tools/dev/spike_det_bwd.py --layouts causal1,lognormal \
  --configs "mosaic det" --variant "noadd:abl=5" --variant "addonly:abl=6" \
  --variant "nofence:abl=7" --rounds 3 > $OUT/7-spike-ablate-store.txt 2>&1; echo "rc $?"
grep -v "^round" $OUT/7-spike-ablate-store.txt | tail -10; date +%T
# dQ's adds from the producer's warp 1 while its warp 0 loads (FA3's arrangement), against the
# default and call 4's whole-warpgroup variant; its own process, in case it hangs
timeout -s INT 240 python3 tools/dev/spike_det_bwd.py --layouts causal1,lognormal \
  --configs "mosaic det" --variant "warp1:dq_store=2" --variant "producer:dq_store=1" \
  --rounds 3 > $OUT/7-spike-warp-dq.txt 2>&1; echo "rc $?"
grep -v "^round" $OUT/7-spike-warp-dq.txt | tail -8; date +%T
