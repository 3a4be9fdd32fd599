source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
# The full steps two at a time (pairs=1): the second step's S^T issued before the first step's
# softmax, so that the tensor cores compute it meanwhile at full width (64 queries). Capped on
# log-normal and 8 documents, then uncapped on log-normal documents and one causal document.
timeout -s INT 150 python3 tools/dev/spike_det_bwd.py --layouts lognormal,docs8 --configs "mosaic det" --cap 30 --variant "pairs:pairs=1" --rounds 6 --repeats 3 > $OUT/spike-cap.txt 2>&1; echo "rc $?"; grep -v "^round" $OUT/spike-cap.txt | tail -6; date +%T
timeout -s INT 150 python3 tools/dev/spike_det_bwd.py --layouts lognormal,causal1 --configs "mosaic det" --variant "pairs:pairs=1" --rounds 5 --repeats 2 > $OUT/spike-nocap.txt 2>&1; echo "rc $?"; grep -v "^round" $OUT/spike-nocap.txt | tail -6; date +%T
