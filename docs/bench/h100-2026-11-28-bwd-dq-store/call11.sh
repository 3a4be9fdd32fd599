# Session 38, on next3.patch (call 10's dq_store=3, its producer now the default one: in call
# 10 it took dq_store=1's producer, which waits for consumers' arrivals that never come, and
# hung). Short, for the device time left.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; date +%T
timeout -s KILL 230 python3 tools/dev/spike_det_bwd.py --layouts causal1,lognormal \
  --configs "mosaic det" --variant "red:dq_store=3" --rounds 2 \
  > $OUT/11-spike.txt 2>&1; echo "rc $?"
grep -v "^round" $OUT/11-spike.txt | tail -8; date +%T
