source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
# the benchmark's rows again on the changed backward, beside FA3 (and cuDNN's packed path on 8
# documents); FlexAttention's forward is unchanged and not rerun here
B="python3 tools/bench.py mha_bwd --repeats 1 --layers 8 --also-backends auto:nondeterministic --peer-timeout 150 --seq-lens 65536"
run() { t=$1; name=$2; shift 2; echo "=== $name: $B $*"; date +%T; timeout -s INT $t $B --out /tmp/bo/$name "$@" > $OUT/bench-$name.txt 2>&1; echo "rc $?"; date +%T; cp /tmp/bo/$name/results.json $OUT/$name-results.json; grep -A7 "allowed pairs" $OUT/bench-$name.txt | head -9; }
run 185 lognormal --rounds 12 --peers fa3 --num-pad-tokens 1000 --doc-median 1100 --ids shuffled
run 185 docs8 --rounds 8 --peers fa3,cudnn_packed --num-segments 8 --num-pad-tokens 2000
run 150 short --rounds 12 --peers fa3 --num-pad-tokens 1000 --doc-median 190
date +%T
