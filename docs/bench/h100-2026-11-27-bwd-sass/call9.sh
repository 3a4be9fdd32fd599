source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
# with rotate.patch applied: each program starts its fully visible query tiles at its own one
# (rot: key tile mod their count), so that the programs running together (a kv head's key tiles)
# reduce-add into different rows of dQ; bitwise the same dQ by default (integer sums)
timeout -s INT 420 python3 tools/dev/spike_det_bwd.py --layouts bidir16k,causal1,lognormal --configs "mosaic det,mosaic nondet" --variant "rot:rotate=1" --rounds 3 --repeats 4 > $OUT/spike.txt 2>&1; echo "rc $?"; grep -v "^round" $OUT/spike.txt | grep -v "max |d" | tail -16; date +%T
