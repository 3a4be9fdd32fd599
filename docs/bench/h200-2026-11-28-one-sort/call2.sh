# Call 2 (session 42, the same H200, warm): the public benchmark's chained table (8 calls a
# layer chain) on the short-document and log-normal rows with the rank rule, beside FA3 and
# FlexAttention, as the README's table was run on an H100 (docs/bench/h100-2026-11-27-table/).
source tools/gpu_env.sh >/dev/null 2>&1
B="python3 tools/bench.py mha_bwd --repeats 1 --layers 8 --also-backends auto:nondeterministic --peer-timeout 150 --seq-lens 65536"
run() { t=$1; name=$2; shift 2; echo "=== $name: $B $*"; date +%T; timeout -s INT $t $B --out /tmp/bo/$name "$@" > $OUT/bench-$name.txt 2>&1; echo "rc $?"; date +%T; cp /tmp/bo/$name/results.json $OUT/$name-results.json; grep -A7 "allowed pairs" $OUT/bench-$name.txt | head -9; }
run 270 short --rounds 12 --peers fa3,flex --num-pad-tokens 1000 --doc-median 190
run $((560 - SECONDS)) lognormal --rounds 12 --peers fa3,flex --num-pad-tokens 1000 --doc-median 1100 --ids shuffled
echo "done at $SECONDS s"
