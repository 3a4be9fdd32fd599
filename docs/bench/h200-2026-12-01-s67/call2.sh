# Session 67 call 2: the channel split with two stages of Q and dO (2275f5c: each step's dQ
# shares staged in that stage's own bytes). Its GPU tests, then its speed against the Triton
# backward (default blocks and the 64x64 tip) on call 1's rows. One H200.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
timeout -s INT 200 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu \
  packages/kvax-core/tests/test_mosaic.py -k channel_split -n 6 \
  --kvax-report $OUT/h200-channel-split-2stage.md > $OUT/pytest2.txt 2>&1
echo "pytest rc $?"; tail -3 $OUT/pytest2.txt
for rows in "--num-segments 8 --num-pad-tokens 2000" "--doc-median 1100 --num-pad-tokens 1000"; do
  for split in "--mosaic-bwd-channel-split" ""; do
    timeout -s INT 100 python3 tools/dev/tune.py --head-dim 256 --heads 16 --kv-heads 8 $rows \
      --repeats 5 --fwd --bwd ${split:-64,64,8,2} $split \
      --out $OUT/tune2-$(echo $rows | cut -d' ' -f2)${split:+-split}.json 2>&1 \
      | grep "^{\|pairs\|Error"
    echo "at $SECONDS s"
  done
done
