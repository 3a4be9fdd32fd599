source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
B="python3 tools/bench.py mha_bwd --repeats 1 --rounds 40 --also-backends auto:nondeterministic --peer-timeout 120 --seq-lens 65536"
run() { name=$1; shift; echo "=== $name: $B $*"; date +%T; timeout -s INT 200 $B --out $OUT/$name "$@" > $OUT/bench-$name.txt 2>&1; echo "rc $?"; date +%T; grep -A6 "allowed pairs" $OUT/bench-$name.txt | head -9; }
run docs8 --peers fa3,cudnn_packed,flex --num-segments 8 --num-pad-tokens 2000
run lognormal --peers fa3,flex --num-pad-tokens 1000 --doc-median 1100 --ids shuffled
run short --peers fa3,flex --num-pad-tokens 1000 --doc-median 190
