source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; date +%T
D=docs/bench/h100-2026-11-27-bwd-sass
# the new backward's PTX (default), for its SASS
mkdir -p /tmp/dump2; MOSAIC_GPU_DUMP_TO=/tmp/dump2 MOSAIC_GPU_DUMP_PTX=1 MOSAIC_GPU_DUMP_PTXAS=1 \
  timeout -s INT 100 python3 tools/dev/spike_det_bwd.py --layouts causal1 --rounds 1 --repeats 1 --configs "mosaic det" > $OUT/dump2.txt 2>&1; echo "rc $?"
cd /tmp && tar czf $OUT/dump2.tgz dump2/entry_1.ptx dump2/entry_1.ptxas; cd - > /dev/null; cat /tmp/dump2/entry_1.ptxas | grep -i spill; date +%T
# before (HEAD's mosaic_bwd.py) against now, and each trial change off on its own
timeout -s INT 420 python3 tools/dev/spike_det_bwd.py --layouts causal1,lognormal --configs "mosaic det,mosaic nondet" --before $D/before_mosaic_bwd.py --variant "div:head_arg=0" --variant "3bar:one_barrier=0" --rounds 3 > $OUT/spike.txt 2>&1; echo "rc $?"; grep -v "^round" $OUT/spike.txt | tail -30; date +%T
