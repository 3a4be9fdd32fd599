source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
echo "=== profile lognormal"; date +%T
timeout -s INT 120 python3 tools/dev/profile_step.py --doc-median 1100 --ids shuffled > $OUT/profile-lognormal.txt 2>&1; echo "rc $?"; head -40 $OUT/profile-lognormal.txt | cut -c1-160
B="python3 tools/bench.py mha_bwd --repeats 1 --rounds 40 --also-backends auto:nondeterministic --peer-timeout 120"
run() { t=$1; name=$2; shift 2; echo "=== $name: $B $*"; date +%T; timeout -s INT $t $B --out /tmp/bo/$name "$@" > $OUT/bench-$name.txt 2>&1; echo "rc $?"; date +%T; cp /tmp/bo/$name/results.json $OUT/$name-results.json; grep -A7 "allowed pairs" $OUT/bench-$name.txt | head -9; }
run 130 bidirectional16k --peers fa3,cudnn --seq-lens 16384 --num-pad-tokens 0 --num-segments 1 --bidirectional
run 130 window4096 --peers fa3 --seq-lens 65536 --num-pad-tokens 2000 --num-segments 8 --window 4096
run 200 causal1 --peers fa3,cudnn --seq-lens 65536 --num-segments 1 --num-pad-tokens 0 --rounds 15
