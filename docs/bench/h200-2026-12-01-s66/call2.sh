# Session 66, call 2 (one H200): the Triton backward with dK and dV in programs of their own at head
# dim 256 (KV_PARTS 2: each recomputes the probabilities and holds one float32 accumulator; sm_90a
# spills 272 bytes a thread instead of 820), timed against the pair in one program
# (--split-dkdv-from 512) on call 1's two rows, default blocks and 64x64; then kvax-core's GPU
# tests at head dim 256, most of which run this backward.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
for rows in "--num-segments 8 --num-pad-tokens 2000" "--doc-median 1100 --num-pad-tokens 1000"; do
  for split in 256 512; do
    timeout -s INT 120 python3 tools/dev/tune.py --head-dim 256 --heads 16 --kv-heads 8 $rows \
      --repeats 5 --fwd --bwd 64,64,8,2 --split-dkdv-from $split \
      --out $OUT/tune-split$split-$(echo $rows | cut -d' ' -f2).json 2>&1 \
      | grep "^{\|pairs\|Error"
    echo "split $split at $SECONDS s"
  done
done
timeout -s INT $((560 - SECONDS)) python3 -m pytest -p kvax_testing.pytest_plugin -m gpu \
  packages/kvax-core -k 256 -n 12 --kvax-report $OUT/h200-kvax-core-hd256.md > $OUT/2-pytest.txt 2>&1
echo "pytest rc $?"; tail -3 $OUT/2-pytest.txt
echo "done at $SECONDS s"
# (ran at 86d30c7, whose kernel change was reverted after this call: 11-13% slower, README here)
