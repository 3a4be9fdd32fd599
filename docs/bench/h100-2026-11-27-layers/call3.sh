source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
B="python3 tools/bench.py mha_bwd --repeats 1 --also-backends auto:nondeterministic --peer-timeout 120 --seq-lens 65536 --peers fa3"
run() { t=$1; name=$2; shift 2; echo "=== $name: $B $*"; date +%T; timeout -s INT $t $B --out /tmp/bo/$name "$@" > $OUT/bench-$name.txt 2>&1; echo "rc $?"; date +%T; cp /tmp/bo/$name/results.json $OUT/$name-results.json; grep -A8 "allowed pairs" $OUT/bench-$name.txt | head -10; }
# 8 chained calls per timing (a model's layers), then the same row one call at a time
run 170 lognormal-layers8 --layers 8 --rounds 20 --num-pad-tokens 1000 --doc-median 1100 --ids shuffled
run 170 docs8-layers8 --layers 8 --rounds 12 --num-segments 8 --num-pad-tokens 2000
run 150 lognormal-single --rounds 40 --num-pad-tokens 1000 --doc-median 1100 --ids shuffled
date +%T
