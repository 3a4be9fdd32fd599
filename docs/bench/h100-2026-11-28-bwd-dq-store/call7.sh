# NOT RUN (session 37's device time ran out): the next three ablations of dQ's store path.
# Apply first: git apply docs/bench/h100-2026-11-28-bwd-dq-store/ablate-store.patch
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; date +%T
timeout -s INT 540 python3 tools/dev/spike_det_bwd.py --layouts causal1,lognormal,bidir16k \
  --configs "mosaic det" --variant "noadd:abl=5" --variant "addonly:abl=6" \
  --variant "nofence:abl=7" --rounds 4 \
  > $OUT/7-spike-ablate-store.txt 2>&1; echo "rc $?"
grep -v "^round" $OUT/7-spike-ablate-store.txt | tail -16; date +%T
