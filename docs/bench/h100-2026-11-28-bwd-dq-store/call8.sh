# NOT RUN (session 37's device time ran out): dQ's reduce-adds issued by the producer's warp 1
# while its warp 0 issues the loads (FA3's arrangement; plgpu.warp_map), against the default and
# call 4's whole-warpgroup variant. Apply first:
#   git apply docs/bench/h100-2026-11-28-bwd-dq-store/producer-warp-dq.patch
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; date +%T
timeout -s INT 400 python3 tools/dev/spike_det_bwd.py --layouts causal1,lognormal,bidir16k \
  --configs "mosaic det" --variant "warp1:dq_store=2" --variant "producer:dq_store=1" \
  --rounds 3 > $OUT/8-spike-warp-dq.txt 2>&1; echo "rc $?"
grep -v "^round" $OUT/8-spike-warp-dq.txt | tail -12; date +%T
