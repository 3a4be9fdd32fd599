# Call 1 (session 39): time, SM clock and power of ours and FA3's forward and forward+backward
# (tools/dev/clocks.py), then Nsight Compute at the base clock on one causal 64k document's step.
set -x
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm,power.limit --format=csv
timeout -s KILL 330 python3 tools/dev/clocks.py --layouts causal1,lognormal,bidir16k,docs8 \
  --rounds 3 --seconds 1.5 2>&1 | grep -v "^W0000\|^I0000" | tee $OUT/1-clocks.txt
export XLA_FLAGS=--xla_gpu_autotune_level=0
timeout -s KILL 200 ncu --clock-control base --section SpeedOfLight \
  --section ComputeWorkloadAnalysis --section WarpStateStats --section MemoryWorkloadAnalysis \
  -o /tmp/causal python3 tools/dev/ncu_step.py --num-segments 1 --num-pad-tokens 0 \
  --which ours,ours-nondet,fa3 2>&1 | tail -20 | tee $OUT/1-ncu-log.txt
ncu --import /tmp/causal.ncu-rep --csv --page details > /tmp/details.csv
gzip -c /tmp/details.csv > $OUT/1-ncu-details.csv.gz
ls -la /tmp/causal.ncu-rep /tmp/details.csv
