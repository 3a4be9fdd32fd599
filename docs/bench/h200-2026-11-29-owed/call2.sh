# Session 51, call 2 (one H200): the benchmark's packed rows at today's kernels (unchanged since
# session 45), chained as a model's layers beside FA3 and FlexAttention (cuDNN's packed path on
# 8 documents), as docs/bench/h100-2026-11-27-table/call2.sh ran them on an H100.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
B="python3 tools/bench.py mha_bwd --repeats 1 --layers 8 --also-backends auto:nondeterministic --peer-timeout 120 --seq-lens 65536"
run() { t=$1; name=$2; shift 2; echo "=== $name: $B $*"; date +%T; timeout -s INT $t $B --out /tmp/bo/$name "$@" > $OUT/bench-$name.txt 2>&1; echo "rc $?"; date +%T; cp /tmp/bo/$name/results.json $OUT/$name-results.json; grep -A7 "allowed pairs" $OUT/bench-$name.txt | head -9; }
run 175 lognormal --rounds 12 --peers fa3,flex --num-pad-tokens 1000 --doc-median 1100 --ids shuffled
run 165 short --rounds 12 --peers fa3,flex --num-pad-tokens 1000 --doc-median 190
run $((575 - SECONDS)) docs8 --rounds 10 --peers fa3,cudnn_packed,flex --num-segments 8 --num-pad-tokens 2000
echo "done at $SECONDS s"
