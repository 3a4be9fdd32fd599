# Session 51, call 3 (one H200): the single documents beside FA3 and cuDNN's is_causal, and the
# 4096-token window over 8 documents beside FA3 and FlexAttention, at today's kernels, as
# docs/bench/h100-2026-11-27-table/call3.sh and call4.sh ran them on an H100.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
B="python3 tools/bench.py mha_bwd --repeats 1 --also-backends auto:nondeterministic --peer-timeout 120"
run() { t=$1; name=$2; shift 2; echo "=== $name: $B $*"; date +%T; timeout -s INT $t $B --out /tmp/bo/$name "$@" > $OUT/bench-$name.txt 2>&1; echo "rc $?"; date +%T; cp /tmp/bo/$name/results.json $OUT/$name-results.json; grep -A7 "allowed pairs" $OUT/bench-$name.txt | head -9; }
# one causal 64k document is ~58 ms a call: one call at a time
run 160 causal1 --layers 1 --rounds 8 --seq-lens 65536 --peers fa3,cudnn --num-segments 1 --num-pad-tokens 0
run 130 bidirectional16k --layers 8 --rounds 16 --seq-lens 16384 --peers fa3,cudnn --num-pad-tokens 0 --num-segments 1 --bidirectional
run $((560 - SECONDS)) window4096 --layers 8 --rounds 10 --seq-lens 65536 --peers fa3,flex --num-segments 8 --num-pad-tokens 2000 --window 4096
echo "done at $SECONDS s"
