# Call 2 (session 39): Nsight Compute, a few metrics (few replay passes), on one step of ours
# (deterministic and not) and FA3's: the causal 64k document, then log-normal documents.
set -x
source tools/gpu_env.sh
export XLA_FLAGS=--xla_gpu_autotune_level=0
M=gpu__time_duration.sum,sm__cycles_elapsed.max,smsp__inst_executed.sum,dram__bytes_read.sum,\
dram__bytes_write.sum,lts__t_bytes.sum,lts__t_sector_hit_rate.pct,\
sm__inst_executed_pipe_tensor_op_gmma.avg.pct_of_peak_sustained_elapsed,\
l1tex__data_bank_reads.avg.pct_of_peak_sustained_elapsed,\
l1tex__data_bank_writes.avg.pct_of_peak_sustained_elapsed,\
smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,\
smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio
profile() {  # name, row args: ncu in the background, killed with its child after 170 s
  ncu --clock-control none --metrics $M --csv --log-file $OUT/2-ncu-$1.csv \
    python3 tools/dev/ncu_step.py ${@:2} --which ours,ours-nondet,fa3 > $OUT/2-log-$1.txt 2>&1 &
  for i in $(seq 170); do sleep 1; kill -0 $! 2>/dev/null || break; done
  pkill -9 -f ncu_step.py; pkill -9 -x ncu; sleep 1
}
profile causal1 --num-segments 1 --num-pad-tokens 0
profile lognormal --doc-median 1100 --ids shuffled --num-pad-tokens 1000
ls -la $OUT
