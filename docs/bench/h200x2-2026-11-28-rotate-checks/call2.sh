# Call 2 (session 40, 2 H200s): what session 39 left unmeasured after the backward's rotation.
# 1. kvax-dist's suite on the GPU mesh; 2. the benchmark's bidirectional 16k row beside FA3 and
# cuDNN (GPU 0); 3. the rotation on and off in both dQ modes (norot, norot-nd).
set -x
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
timeout -s INT 200 python3 -m pytest -p kvax_testing.pytest_plugin packages/kvax-dist \
  --kvax-mesh-platform gpu -q -n 6 --kvax-report $OUT/h200x2-kvax-dist-rotate.md \
  > $OUT/2-dist.txt 2>&1; echo "dist rc $?"; tail -2 $OUT/2-dist.txt; echo "at $SECONDS s"
export CUDA_VISIBLE_DEVICES=0
timeout -s INT 150 python3 tools/bench.py mha_bwd --repeats 1 \
  --also-backends auto:nondeterministic --peer-timeout 100 --out /tmp/bo/bidir16k --layers 8 \
  --rounds 20 --seq-lens 16384 --peers fa3,cudnn --num-pad-tokens 0 --num-segments 1 \
  --bidirectional > $OUT/2-bench-bidir16k.txt 2>&1; echo "bench rc $?"
cp /tmp/bo/bidir16k/results.json $OUT/2-bidir16k-results.json
grep -A7 "allowed pairs" $OUT/2-bench-bidir16k.txt | head -9; echo "at $SECONDS s"
timeout -s KILL $((590 - SECONDS)) python3 tools/dev/spike_det_bwd.py \
  --layouts bidir16k,docs8bidir --configs "mosaic det,mosaic nondet" \
  --variant "norot:rotate=0" --variant "norot-nd:rotate=0,deterministic=0" --rounds 4 2>&1 \
  | grep -v "^W0000\|^I0000" | tee $OUT/2-spike-rotate-nondet.txt
