source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; date +%T
# dQ's shares in two alternating shared-memory buffers (dq_buffers=2) against one (default)
timeout -s INT 250 python3 tools/dev/spike_det_bwd.py --layouts causal1,lognormal,bidir16k \
  --configs "mosaic det" --variant "buf2:dq_buffers=2" --rounds 3 > $OUT/5-spike.txt 2>&1; echo "rc $?"
grep -v "^round" $OUT/5-spike.txt | tail -12; date +%T
timeout -s INT 70 python3 tools/dev/spike_det_bwd.py --layouts lognormal --cap 30 \
  --configs "mosaic det" --variant "buf2:dq_buffers=2" --rounds 3 > $OUT/5-spike-cap.txt 2>&1; echo "rc $?"
grep -v "^round" $OUT/5-spike-cap.txt | tail -4; date +%T
