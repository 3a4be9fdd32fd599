source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; date +%T
D=docs/bench/h100-2026-11-28-bwd-dq-store
# the PTX of the default backward and of the trials (one call each, one causal document)
mkdir -p /tmp/dump; MOSAIC_GPU_DUMP_TO=/tmp/dump MOSAIC_GPU_DUMP_PTX=1 MOSAIC_GPU_DUMP_PTXAS=1 \
  timeout -s INT 170 python3 tools/dev/spike_det_bwd.py --layouts bidir16k --rounds 1 --repeats 1 \
  --configs "mosaic det" --variant "dq:dq_scoped=1" --variant "dp:dp_scoped=1" \
  --variant "both:dq_scoped=1,dp_scoped=1" > $OUT/1-dump.txt 2>&1; echo "rc $?"
ls /tmp/dump | head -30; grep -i spill /tmp/dump/*.ptxas
cd /tmp && tar czf $OUT/1-dump.tgz dump/*.ptx dump/*.ptxas; cd - > /dev/null; date +%T
timeout -s INT 400 python3 tools/dev/spike_det_bwd.py --layouts causal1,bidir16k,lognormal,docs8 \
  --configs "mosaic det,mosaic nondet" --variant "dq:dq_scoped=1" --variant "both:dq_scoped=1,dp_scoped=1" \
  --rounds 4 > $OUT/1-spike.txt 2>&1; echo "rc $?"; grep -v "^round" $OUT/1-spike.txt | tail -30; date +%T
