source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
B="python3 tools/bench.py mha_bwd --repeats 1 --also-backends auto:nondeterministic --peer-timeout 150"
run() { t=$1; name=$2; shift 2; echo "=== $name: $B $*"; date +%T; timeout -s INT $t $B --out /tmp/bo/$name "$@" > $OUT/bench-$name.txt 2>&1; echo "rc $?"; date +%T; cp /tmp/bo/$name/results.json $OUT/$name-results.json; grep -A7 "allowed pairs" $OUT/bench-$name.txt | head -9; }
# one causal 64k document is 58 ms a call: one call at a time (call 3's 8 chained ran out of time)
run 160 causal1 --layers 1 --rounds 8 --seq-lens 65536 --peers fa3,cudnn --num-segments 1 --num-pad-tokens 0
run 230 docs16-128k --layers 4 --rounds 6 --seq-lens 131072 --peers fa3,flex --num-segments 16 --num-pad-tokens 4000
run 160 window4096 --layers 8 --rounds 10 --seq-lens 65536 --peers fa3,flex --num-segments 8 --num-pad-tokens 2000 --window 4096
date +%T
