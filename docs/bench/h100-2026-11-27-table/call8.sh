source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
# the floor's row once more, chained, FA3 beside (more readings of the log-normal forward)
timeout -s INT 200 python3 tools/bench.py mha_bwd --repeats 1 --rounds 30 --layers 8 --also-backends auto:nondeterministic --seq-lens 65536 --peers fa3 --num-pad-tokens 1000 --doc-median 1100 --ids shuffled --out /tmp/bo/ln > $OUT/bench-lognormal.txt 2>&1; echo "rc $?"; cp /tmp/bo/ln/results.json $OUT/lognormal-results.json; grep -A6 "allowed pairs" $OUT/bench-lognormal.txt | head -7; date +%T
# the default persistent kernel alone, the public call, FA3: single, waited and queued calls
timeout -s INT 150 python3 tools/dev/per_call.py --out $OUT/pc --rows 1 --configs 64x128x2p --public --turns 20 --bursts 6 > $OUT/percall.txt 2>&1; echo "rc $?"; grep -E "median" $OUT/percall.txt | grep -v clock | cut -c60-200; date +%T
