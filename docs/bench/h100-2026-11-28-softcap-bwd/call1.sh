source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
D=docs/bench/h100-2026-11-28-softcap-bwd
# 1. the capped backward's PTX and ptxas report after the change (P^T in the input dtype and
#    P^T tanh' in float32 while dP^T is awaited): spills against 680/984 bytes before
mkdir -p /tmp/dump-cap
MOSAIC_GPU_DUMP_TO=/tmp/dump-cap MOSAIC_GPU_DUMP_PTX=1 MOSAIC_GPU_DUMP_PTXAS=1 \
  timeout -s INT 120 python3 tools/dev/spike_det_bwd.py --layouts causal1 --rounds 1 --repeats 1 \
  --configs "mosaic det" --cap 30 > $OUT/dump-cap.txt 2>&1; echo "rc $? dump"
grep -h "spill\|Used" /tmp/dump-cap/*ptxas* | head; tar czf $OUT/dump-cap.tgz -C /tmp dump-cap; date +%T
# 2. the capped forward+backward, before (HEAD's mosaic_bwd.py) against after, in one process
timeout -s INT 380 python3 tools/dev/spike_det_bwd.py --layouts lognormal,docs8 --configs "mosaic det,mosaic nondet" --before $D/before_mosaic_bwd.py --cap 30 --rounds 5 --repeats 4 > $OUT/spike.txt 2>&1; echo "rc $?"; grep -v "^round" $OUT/spike.txt | tail -12; date +%T
