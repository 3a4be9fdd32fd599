# Call 3 (session 39): call 2's metrics segfaulted the profiled process at once. Session 17's
# sections instead (they ran then), on log-normal documents only: one step of ours (deterministic
# and not) and FA3's.
set -x
source tools/gpu_env.sh
export XLA_FLAGS=--xla_gpu_autotune_level=0
ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis \
  --section WarpStateStats -o /tmp/lognormal python3 tools/dev/ncu_step.py --doc-median 1100 \
  --ids shuffled --num-pad-tokens 1000 --which ours,ours-nondet,fa3 > $OUT/3-log.txt 2>&1 &
for i in $(seq 240); do sleep 1; kill -0 $! 2>/dev/null || break; done
pkill -9 -f ncu_step.py; pkill -9 -x ncu; sleep 2
tail -5 $OUT/3-log.txt
ncu --import /tmp/lognormal.ncu-rep --csv --page raw --kernel-name regex:"mosaic|flash" \
  > /tmp/raw.csv && gzip -c /tmp/raw.csv > $OUT/3-ncu-raw-lognormal.csv.gz
ncu --import /tmp/lognormal.ncu-rep --csv --page details --kernel-name regex:"mosaic|flash" \
  > $OUT/3-ncu-details-lognormal.csv
ncu --import /tmp/lognormal.ncu-rep --csv --page raw --metrics gpu__time_duration.sum \
  > $OUT/3-durations.csv
