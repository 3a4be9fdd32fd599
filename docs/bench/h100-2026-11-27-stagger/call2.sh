source tools/gpu_env.sh
mkdir -p $OUT/gpu
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
D=docs/bench/h100-2026-11-27-stagger
# cold first calls, masks built in the step: positions and ids as arguments (a training step's
# case, now first_call's default) against closed over (constants: XLA folds the masks)
F="python3 tools/first_call.py --doc-median 1100 --processes 1"
for c in "auto" "triton" "auto --layout-constant" "triton --layout-constant" "auto --mask-apart"; do
  timeout -s INT 100 $F --backend $c --out $OUT/fc > $OUT/fc.txt 2>&1; echo "rc $? $c: $(tail -1 $OUT/fc.txt)"
done; date +%T
# what closing the timed step over the layout changed in the benchmark's numbers
timeout -s INT 200 python3 tools/dev/spike_layout_args.py --layouts lognormal,short --rounds 10 > $OUT/layout-args.txt 2>&1; echo "rc $?"; tail -9 $OUT/layout-args.txt; date +%T
# a benchmark row with the layout as arguments, kvax 0.1.0's process too (its masks now arguments)
timeout -s INT 150 python3 tools/bench.py mha_bwd --repeats 1 --peer-timeout 100 --seq-lens 65536 --peers fa3,kvax010 --layers 4 --rounds 3 --doc-median 1100 --ids shuffled --num-pad-tokens 1000 --out /tmp/bo/l > $OUT/bench-lognormal.txt 2>&1; echo "rc $?"; cp /tmp/bo/l/results.json $OUT/lognormal-results.json; grep -A6 "allowed pairs" $OUT/bench-lognormal.txt | head -8; date +%T
