source tools/gpu_env.sh
mkdir -p $OUT/gpu
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
timeout -s INT 300 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu packages/kvax-core/tests/test_mosaic.py -n 12 -q -k "further_layer or mosaic_backward or bitwise_the_built" --kvax-report $OUT/gpu/h100-kvax-core-mosaic-dq-zeroing.md > $OUT/suite.txt 2>&1; echo "suite rc $?"; tail -3 $OUT/suite.txt; date +%T
timeout -s INT 120 python3 tools/dev/memory_layers.py --layers 1 2 4 > $OUT/memory-layers.txt 2>&1; echo "rc $?"; grep -v "^ " $OUT/memory-layers.txt | tail -14; date +%T
B="python3 tools/bench.py mha_bwd --repeats 1 --also-backends auto:nondeterministic --peer-timeout 120 --seq-lens 65536 --peers fa3"
timeout -s INT 150 $B --layers 8 --rounds 20 --num-pad-tokens 1000 --doc-median 1100 --ids shuffled --out /tmp/bo/ln > $OUT/bench-lognormal-layers8.txt 2>&1; echo "rc $?"; cp /tmp/bo/ln/results.json $OUT/lognormal-layers8-results.json; grep -A8 "allowed pairs" $OUT/bench-lognormal-layers8.txt | head -10; date +%T
