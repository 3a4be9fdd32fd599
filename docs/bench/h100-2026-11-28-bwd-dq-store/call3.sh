source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; date +%T
# ablations of the backward's step (wrong results, timing only): what each part costs
timeout -s INT 520 python3 tools/dev/spike_det_bwd.py --layouts causal1,lognormal,bidir16k \
  --configs "mosaic det" --variant "nostore:abl=1" --variant "noexp:abl=2" \
  --variant "nowait:abl=3" --variant "nodq:abl=4" --rounds 4 > $OUT/3-spike-ablate.txt 2>&1; echo "rc $?"
grep -v "^round" $OUT/3-spike-ablate.txt | tail -18; date +%T
