source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv; date +%T
# 1. session 34's two backward changes apart, on the bidirectional 16k document (its default read
#    2.0-2.7% slower after both): split.patch brings each back as a BackwardConfig flag
git apply docs/bench/h100-2026-11-27-bwd-sass/split.patch || exit 1
timeout -s INT 200 python3 tools/dev/spike_det_bwd.py --layouts bidir16k --configs "mosaic det" --variant "div:head_arg=0" --variant "3bar:one_barrier=0" --variant "both:head_arg=0,one_barrier=0" --rounds 8 --repeats 4 > $OUT/spike-split.txt 2>&1; echo "rc $?"; grep -v "^round" $OUT/spike-split.txt | tail -6; date +%T
git apply -R docs/bench/h100-2026-11-27-bwd-sass/split.patch || exit 1
# 2. the 128k row again on the changed backward (last run before it: h100-2026-11-27-table call 4)
B="python3 tools/bench.py mha_bwd --repeats 1 --also-backends auto:nondeterministic --peer-timeout 150"
run() { t=$1; name=$2; shift 2; echo "=== $name: $B $*"; date +%T; timeout -s INT $t $B --out /tmp/bo/$name "$@" > $OUT/bench-$name.txt 2>&1; echo "rc $?"; date +%T; cp /tmp/bo/$name/results.json $OUT/$name-results.json; grep -A7 "allowed pairs" $OUT/bench-$name.txt | head -9; }
run 250 docs16-128k --layers 4 --rounds 6 --seq-lens 131072 --peers fa3,flex --num-segments 16 --num-pad-tokens 4000
date +%T
