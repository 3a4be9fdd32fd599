source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
B="python3 tools/bench.py mha_bwd --repeats 1 --rounds 40 --also-backends auto:nondeterministic --peer-timeout 120"
run() { name=$1; shift; echo "=== $name: $B $*"; date +%T; timeout -s INT 170 $B --out /tmp/bo/$name "$@" > $OUT/bench-$name.txt 2>&1; echo "rc $?"; date +%T; cp /tmp/bo/$name/results.json $OUT/$name-results.json; grep -A6 "allowed pairs" $OUT/bench-$name.txt | head -9; }
run docs8 --peers fa3 --seq-lens 65536 --num-segments 8 --num-pad-tokens 2000
run docs16-128k --peers fa3 --seq-lens 131072 --num-segments 16 --num-pad-tokens 4000
run causal1 --peers fa3,cudnn --seq-lens 65536 --num-segments 1 --num-pad-tokens 0
echo "=== softcap lognormal"; date +%T
timeout -s INT 150 python3 tools/dev/spike_softcap.py --rounds 30 --repeats 1 --doc-median 1100 > $OUT/softcap-lognormal.txt 2>&1; echo "rc $?"; tail -6 $OUT/softcap-lognormal.txt; date +%T
