source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
B="python3 tools/bench.py mha_bwd --repeats 1 --also-backends auto:nondeterministic --peer-timeout 150"
run() { t=$1; name=$2; shift 2; echo "=== $name: $B $*"; date +%T; timeout -s INT $t $B --out /tmp/bo/$name "$@" > $OUT/bench-$name.txt 2>&1; echo "rc $?"; date +%T; cp /tmp/bo/$name/results.json $OUT/$name-results.json; grep -A7 "allowed pairs" $OUT/bench-$name.txt | head -9; }
run 240 causal1 --rounds 8 --seq-lens 65536 --peers fa3,cudnn --num-segments 1 --num-pad-tokens 0
run 150 bidirectional16k --layers 8 --rounds 20 --seq-lens 16384 --peers fa3,cudnn --num-pad-tokens 0 --num-segments 1 --bidirectional
date +%T
