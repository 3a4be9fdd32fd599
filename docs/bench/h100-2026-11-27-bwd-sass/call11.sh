source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
D=docs/bench/h100-2026-11-27-bwd-sass
# the bidirectional document once more, before against after, more rounds (call 8 read the
# default 2.7% slower after)
timeout -s INT 300 python3 tools/dev/spike_det_bwd.py --layouts bidir16k --configs "mosaic det,mosaic nondet" --before $D/before_mosaic_bwd.py --rounds 8 --repeats 4 > $OUT/spike.txt 2>&1; echo "rc $?"; grep -v "^round" $OUT/spike.txt | tail -5; date +%T
