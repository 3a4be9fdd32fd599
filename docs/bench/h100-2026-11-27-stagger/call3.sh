source tools/gpu_env.sh
mkdir -p $OUT/gpu
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
D=docs/bench/h100-2026-11-27-stagger
# kvax 0.1.0's process with its masks, positions and ids as arguments, on the row it ran in
# session 32 (8 documents, 4 chained calls: 45.07 / 174.51 ms a call), with room to compile
timeout -s INT 280 python3 tools/bench.py mha_bwd --repeats 1 --peer-timeout 250 --seq-lens 65536 --peers kvax010 --layers 4 --rounds 3 --num-segments 8 --num-pad-tokens 2000 --out /tmp/bo/k > $OUT/bench-kvax010.txt 2>&1; echo "rc $?"; cp /tmp/bo/k/results.json $OUT/kvax010-results.json; grep -A6 "allowed pairs" $OUT/bench-kvax010.txt | head -8; date +%T
# the 24 Mosaic backward GPU tests that call 1's run did not reach
mapfile -t ids < $D/2-backward-rest.txt
timeout -s INT 300 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu "${ids[@]}" -n 14 -q --kvax-report $OUT/gpu/h100-kvax-core-mosaic-backward-rest.md > $OUT/suite.txt 2>&1; echo "suite rc $?"; tail -2 $OUT/suite.txt; grep incomplete $OUT/gpu/*.md; date +%T
