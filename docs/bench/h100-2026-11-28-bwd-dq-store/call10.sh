# Session 38, on next3.patch as first written (its dq_store=3): dQ's shares reduced straight from
# the registers (plgpu.atomic_add: int32 red.global.add per element, into a row-major
# accumulator), no shared memory, no fence, no TMA. Integer sums: bitwise equal to the default.
# HUNG (10-spike-hung.txt): dq_store=3 also took dq_store=1's producer, which waits for
# arrivals no consumer makes. next3.patch is the fixed version; call 11 reran it.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; date +%T
timeout -s INT 330 python3 tools/dev/spike_det_bwd.py --layouts causal1,lognormal,docs8 \
  --configs "mosaic det,mosaic nondet" --variant "red:dq_store=3" --rounds 3 \
  > $OUT/10-spike.txt 2>&1; echo "rc $?"
grep -v "^round" $OUT/10-spike.txt | tail -14; date +%T
mkdir -p /tmp/dump; MOSAIC_GPU_DUMP_TO=/tmp/dump MOSAIC_GPU_DUMP_PTX=1 MOSAIC_GPU_DUMP_PTXAS=1 \
  timeout -s INT 120 python3 tools/dev/spike_det_bwd.py --layouts bidir16k --rounds 1 --repeats 1 \
  --configs "triton det" --variant "red:dq_store=3" > $OUT/10-dump.txt 2>&1; echo "rc $?"
grep -i spill /tmp/dump/*.ptxas
cd /tmp && tar czf $OUT/10-dump.tgz dump/*.ptx dump/*.ptxas; cd - > /dev/null; date +%T
