source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; date +%T
# dQ's reduce-adds with FA3's L2 evict-last cache hint (the PTX string rewritten in the spike)
timeout -s INT 190 python3 tools/dev/spike_det_bwd.py --layouts lognormal,causal1 \
  --configs "mosaic det" --evict-last --rounds 2 --repeats 5 > $OUT/6-spike-evict-last.txt 2>&1; echo "rc $?"
grep -v "^round" $OUT/6-spike-evict-last.txt | tail -10; date +%T
