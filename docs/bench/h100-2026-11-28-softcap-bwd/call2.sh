source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
D=docs/bench/h100-2026-11-28-softcap-bwd
# 1. where the capped backward's time goes (the tree carries the cap_trial flags of
#    cap-trial.patch): tanh in float16 pairs (half the MUFU instructions), no tanh (wrong
#    results), no cap (wrong results: the uncapped step, in the same process)
timeout -s INT 250 python3 tools/dev/spike_det_bwd.py --layouts lognormal,docs8 --configs "mosaic det" --cap 30 --variant "f16:cap_trial=1" --variant "notanh:cap_trial=2" --variant "nocap:cap_trial=3" --rounds 5 --repeats 4 > $OUT/spike-cap.txt 2>&1; echo "rc $?"; grep -v "^round" $OUT/spike-cap.txt | tail -9; date +%T
# 2. session 34's split of its two backward changes on the bidirectional 16k document
git apply docs/bench/h100-2026-11-27-bwd-sass/split.patch || exit 1
timeout -s INT 280 python3 tools/dev/spike_det_bwd.py --layouts bidir16k --configs "mosaic det" --variant "div:head_arg=0" --variant "3bar:one_barrier=0" --variant "both:head_arg=0,one_barrier=0" --rounds 8 --repeats 4 > $OUT/spike-split.txt 2>&1; echo "rc $?"; grep -v "^round" $OUT/spike-split.txt | tail -6; date +%T
