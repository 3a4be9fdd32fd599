# Call 4 (session 39): call 1 again with the backward alone timed as well (clocks.py's "bwd").
set -x
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
timeout -s KILL 420 python3 tools/dev/clocks.py --layouts lognormal,bidir16k,docs8,causal1 \
  --rounds 3 --seconds 1.5 2>&1 | grep -v "^W0000\|^I0000" | tee $OUT/4-clocks.txt
