source tools/gpu_env.sh
mkdir -p $OUT/gpu
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
B="python3 tools/bench.py mha_bwd --repeats 1 --rounds 40 --also-backends auto:nondeterministic --peer-timeout 120 --seq-lens 65536"
run() { t=$1; name=$2; shift 2; echo "=== $name: $B $*"; date +%T; timeout -s INT $t $B --out /tmp/bo/$name "$@" > $OUT/bench-$name.txt 2>&1; echo "rc $?"; date +%T; cp /tmp/bo/$name/results.json $OUT/$name-results.json; grep -A6 "allowed pairs" $OUT/bench-$name.txt | head -8; }
run 140 lognormal --peers fa3 --num-pad-tokens 1000 --doc-median 1100 --ids shuffled
run 140 docs8 --peers fa3 --num-segments 8 --num-pad-tokens 2000
date +%T
timeout -s INT 290 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu packages/kvax-core/tests/test_mosaic.py -n 12 -k "document_chunks or test_matches_reference or deterministic_and_padding or auto_picks or persistent" --kvax-report $OUT/gpu/h100-kvax-core-mosaic-work-scan-a.md -q 2>&1 | tail -4
date +%T
