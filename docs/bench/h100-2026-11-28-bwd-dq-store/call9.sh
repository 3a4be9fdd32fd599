# Session 38, on next3.patch. The PTX of the default (det and nondet) and of two ablations, to
# read locally in SASS: why is the store path without its TMA add (noadd) slower than with it?
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; date +%T
mkdir -p /tmp/dump; MOSAIC_GPU_DUMP_TO=/tmp/dump MOSAIC_GPU_DUMP_PTX=1 MOSAIC_GPU_DUMP_PTXAS=1 \
  timeout -s INT 300 python3 tools/dev/spike_det_bwd.py --layouts bidir16k --rounds 1 --repeats 1 \
  --configs "mosaic det,mosaic nondet" --variant "noadd:abl=5" --variant "addonly:abl=6" \
  > $OUT/9-dump.txt 2>&1; echo "rc $?"
ls /tmp/dump | head -30; grep -i spill /tmp/dump/*.ptxas
cd /tmp && tar czf $OUT/9-dump.tgz dump/*.ptx dump/*.ptxas; cd - > /dev/null; date +%T
