# Session 38, on no-auto-barriers.patch (on 6a0784a): the backward compiled with
# CompilerParams(unsafe_no_auto_barriers=True). FA3's step has 3 barriers where ours has 7: Pallas
# puts a warpgroup barrier before and after every store to shared memory (dS^T's and dQ's), on
# top of the ones commit_smem and the bulk wait already bring. Short, for the device time left.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; date +%T
timeout -s KILL 170 python3 tools/dev/spike_det_bwd.py --layouts causal1,lognormal \
  --configs "mosaic det" --variant "noauto:auto_barriers=0" --rounds 2 \
  > $OUT/12-spike.txt 2>&1; echo "rc $?"
grep -v "^round" $OUT/12-spike.txt | tail -8; date +%T
