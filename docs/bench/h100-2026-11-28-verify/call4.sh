source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
# After call 3: only S^T in column parts (s_parts=2: two products of 32 queries, 4: of 16), each
# part's softmax as soon as it is ready, the parts' P^T and the cap's derivative concatenated in
# registers; dP^T, dV, dQ, dK and the swizzles as by default. Capped on log-normal and 8
# documents, then without a cap (log-normal and one causal document).
timeout -s INT 300 python3 tools/dev/spike_det_bwd.py --layouts lognormal,docs8 --configs "mosaic det" --cap 30 --variant "s2:s_parts=2" --variant "s4:s_parts=4" --rounds 6 --repeats 3 > $OUT/spike-cap.txt 2>&1; echo "rc $?"; grep -v "^round" $OUT/spike-cap.txt | tail -8; date +%T
timeout -s INT 200 python3 tools/dev/spike_det_bwd.py --layouts lognormal,causal1 --configs "mosaic det" --variant "s2:s_parts=2" --variant "s4:s_parts=4" --rounds 6 --repeats 3 > $OUT/spike-nocap.txt 2>&1; echo "rc $?"; grep -v "^round" $OUT/spike-nocap.txt | tail -8; date +%T
