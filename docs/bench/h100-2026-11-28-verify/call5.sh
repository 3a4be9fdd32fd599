source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
# After call 4: the consumers' softmaxes started apart without narrower products. Consumer 0
# issues S^T then dP^T (as by default), consumer 1 dP^T then S^T (wg_order=1), so consumer 0's
# tanh and exp2 can run while the tensor cores compute consumer 1's products.
timeout -s INT 230 python3 tools/dev/spike_det_bwd.py --layouts lognormal,docs8 --configs "mosaic det" --cap 30 --variant "order:wg_order=1" --rounds 6 --repeats 3 > $OUT/spike-cap.txt 2>&1; echo "rc $?"; grep -v "^round" $OUT/spike-cap.txt | tail -6; date +%T
timeout -s INT 120 python3 tools/dev/spike_det_bwd.py --layouts lognormal --configs "mosaic det" --variant "order:wg_order=1" --rounds 6 --repeats 3 > $OUT/spike-nocap.txt 2>&1; echo "rc $?"; grep -v "^round" $OUT/spike-nocap.txt | tail -4; date +%T
