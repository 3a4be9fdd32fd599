source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
# The backward's S^T and dP^T in two column parts of 32 queries (query_parts=2), so that the
# first part's tanh and exp2 run while the tensor cores compute the second part and dP^T; with
# early_dv=1 each part's dV product is issued as soon as its P^T is. Both need 64-byte swizzles
# for head dim 128 (wgmma's operands share one swizzle). Timed against the default in one process,
# capped (c = 30) on log-normal documents and 8 documents, then without a cap.
timeout -s INT 330 python3 tools/dev/spike_det_bwd.py --layouts lognormal,docs8 --configs "mosaic det" --cap 30 --variant "parts2:query_parts=2" --variant "early2:query_parts=2,early_dv=1" --variant "sw64:max_swizzle=64" --rounds 6 --repeats 3 > $OUT/spike-cap.txt 2>&1; echo "rc $?"; grep -v "^round" $OUT/spike-cap.txt | tail -16; date +%T
timeout -s INT 200 python3 tools/dev/spike_det_bwd.py --layouts lognormal --configs "mosaic det" --variant "parts2:query_parts=2" --variant "early2:query_parts=2,early_dv=1" --rounds 6 --repeats 3 > $OUT/spike-nocap.txt 2>&1; echo "rc $?"; grep -v "^round" $OUT/spike-nocap.txt | tail -8; date +%T
