source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
D=docs/bench/h100-2026-11-27-bwd-sass
# before against after on an H100, on the two single-document rows (call 7 read the default's
# forward+backward on the bidirectional document slower than the table of 2026-11-27 did)
# (before_mosaic_bwd.py: git show c22ad4e:packages/kvax-core/src/kvax/_src/attention/mosaic_bwd.py)
timeout -s INT 400 python3 tools/dev/spike_det_bwd.py --layouts bidir16k,causal1 --configs "mosaic det,mosaic nondet" --before $D/before_mosaic_bwd.py --rounds 5 --repeats 4 > $OUT/spike.txt 2>&1; echo "rc $?"; grep -v "^round" $OUT/spike.txt | tail -9; date +%T
