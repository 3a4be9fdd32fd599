# Session 67 call 1: session 66's next-call.sh as prepared (the channel split's GPU tests, then
# its speed at head dim 256 against today's Triton backward). One H200.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
timeout -s INT 200 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu \
  packages/kvax-core/tests/test_mosaic.py -k channel_split -n 6 \
  --kvax-report $OUT/h200-channel-split.md > $OUT/pytest.txt 2>&1
echo "pytest rc $?"; tail -3 $OUT/pytest.txt
for rows in "--num-segments 8 --num-pad-tokens 2000" "--doc-median 1100 --num-pad-tokens 1000"; do
  for split in "" "--mosaic-bwd-channel-split"; do
    timeout -s INT 100 python3 tools/dev/tune.py --head-dim 256 --heads 16 --kv-heads 8 $rows \
      --repeats 5 --fwd --bwd 64,64,8,2 $split \
      --out $OUT/tune-$(echo $rows | cut -d' ' -f2)${split:+-split}.json 2>&1 \
      | grep "^{\|pairs\|Error"
    echo "at $SECONDS s"
  done
done
