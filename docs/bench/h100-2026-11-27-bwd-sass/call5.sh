source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
# with ablate-rule.patch applied: a bound on what a cheaper element rule could give the backward
# (R: masked steps without the rule or its loads; wrong results, timing only)
timeout -s INT 300 python3 tools/dev/spike_det_bwd.py --layouts lognormal,short,docs8 --configs "mosaic det,mosaic nondet" --variant "R:rule=0" --rounds 3 > $OUT/spike.txt 2>&1; echo "rc $?"; grep -v "^round" $OUT/spike.txt | tail -10; date +%T
