source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv; date +%T
# 1. call 4 found the division brought back (div) 1.8% faster on the bidirectional document, three
#    barriers level: the division on the other rows, before deciding which to keep
git apply docs/bench/h100-2026-11-27-bwd-sass/split.patch || exit 1
timeout -s INT 260 python3 tools/dev/spike_det_bwd.py --layouts lognormal,docs8,causal1 --configs "mosaic det" --variant "div:head_arg=0" --rounds 6 --repeats 3 > $OUT/spike-split.txt 2>&1; echo "rc $?"; grep -v "^round" $OUT/spike-split.txt | tail -7; date +%T
git apply -R docs/bench/h100-2026-11-27-bwd-sass/split.patch || exit 1
# 2. the window row again on the changed backward (last run before it: h100-2026-11-27-table call 4)
B="python3 tools/bench.py mha_bwd --repeats 1 --also-backends auto:nondeterministic --peer-timeout 150"
run() { t=$1; name=$2; shift 2; echo "=== $name: $B $*"; date +%T; timeout -s INT $t $B --out /tmp/bo/$name "$@" > $OUT/bench-$name.txt 2>&1; echo "rc $?"; date +%T; cp /tmp/bo/$name/results.json $OUT/$name-results.json; grep -A7 "allowed pairs" $OUT/bench-$name.txt | head -9; }
run 200 window4096 --layers 8 --rounds 10 --seq-lens 65536 --peers fa3,flex --num-segments 8 --num-pad-tokens 2000 --window 4096
date +%T
