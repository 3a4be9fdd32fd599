source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
# step s's dK product issued in step s + 1, between its S^T and dP^T products, so that it runs
# under the softmax (the tree's defer_dk flag); stages=3 frees each Q slot a step later. The
# deferred kernel must be bitwise equal to `mosaic det` (dK sums its steps in the same order)
timeout -s INT 330 python3 tools/dev/spike_det_bwd.py --layouts lognormal,docs8,causal1 --configs "mosaic det,mosaic nondet" --variant "defer:defer_dk=1" --variant "defer3:defer_dk=1,stages=3" --rounds 4 --repeats 3 > $OUT/spike-defer.txt 2>&1; echo "rc $?"; grep -v "^round" $OUT/spike-defer.txt | tail -22; date +%T
# the same with a soft cap, and each without its cap (cap_trial=3: wrong results, timing only)
timeout -s INT 200 python3 tools/dev/spike_det_bwd.py --layouts lognormal --configs "mosaic det" --cap 30 --variant "defer:defer_dk=1" --variant "nocap:cap_trial=3" --variant "defer-nocap:defer_dk=1,cap_trial=3" --rounds 5 --repeats 4 > $OUT/spike-defer-cap.txt 2>&1; echo "rc $?"; grep -v "^round" $OUT/spike-defer-cap.txt | tail -8; date +%T
