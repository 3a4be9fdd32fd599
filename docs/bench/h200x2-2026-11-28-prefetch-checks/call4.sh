# Call 4 (session 43, one H200): at 725ae11, random cases through the kernels (fuzz.py variants,
# new seeds), then the public benchmark's log-normal row chained beside FA3 and FlexAttention.
set -x
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
timeout -s KILL 150 python3 tools/dev/fuzz.py variants --seeds 4300:4400 --jobs 8 \
  --time-limit 120 2>&1 | grep -v "^W0000\|^I0000" | tee $OUT/4-fuzz.txt | tail -4
echo "at $SECONDS s"
B="python3 tools/bench.py mha_bwd --repeats 1 --layers 8 --also-backends auto:nondeterministic --peer-timeout 150 --seq-lens 65536"
timeout -s INT $((370 - SECONDS)) $B --out /tmp/bo/lognormal --rounds 12 --peers fa3,flex \
  --num-pad-tokens 1000 --doc-median 1100 --ids shuffled > $OUT/bench-lognormal.txt 2>&1
echo "bench rc $?"; cp /tmp/bo/lognormal/results.json $OUT/lognormal-results.json
grep -A7 "allowed pairs" $OUT/bench-lognormal.txt | head -9
echo "done at $SECONDS s"
