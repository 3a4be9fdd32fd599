source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; date +%T
D=docs/bench/h100-2026-11-28-bwd-dq-store
mkdir -p /tmp/dump; MOSAIC_GPU_DUMP_TO=/tmp/dump MOSAIC_GPU_DUMP_PTX=1 MOSAIC_GPU_DUMP_PTXAS=1 \
  timeout -s INT 120 python3 tools/dev/spike_det_bwd.py --layouts bidir16k --rounds 1 --repeats 1 \
  --configs "mosaic det" --variant "early:early_dv=1" > $OUT/2-dump.txt 2>&1; echo "rc $?"
grep -i "spill\|C75" /tmp/dump/*.ptxas
cd /tmp && tar czf $OUT/2-dump.tgz dump/*.ptx dump/*.ptxas; cd - > /dev/null; date +%T
timeout -s INT 330 python3 tools/dev/spike_det_bwd.py --layouts causal1,bidir16k,lognormal,docs8 \
  --configs "mosaic det" --variant "early:early_dv=1" --rounds 5 > $OUT/2-spike.txt 2>&1; echo "rc $?"
grep -v "^round" $OUT/2-spike.txt | tail -12; date +%T
timeout -s INT 120 python3 tools/dev/spike_det_bwd.py --layouts lognormal --cap 30 \
  --configs "mosaic det" --variant "early:early_dv=1" --rounds 5 > $OUT/2-spike-cap.txt 2>&1; echo "rc $?"
grep -v "^round" $OUT/2-spike-cap.txt | tail -4; date +%T
