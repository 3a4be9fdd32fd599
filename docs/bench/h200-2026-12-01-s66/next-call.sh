# Prepared in session 66, not run (the session's device time was spent): the Mosaic backward's
# channel split at head dim 256 (mosaic_bwd.channel_config; both consumers on one 64-key tile, S
# and dP split by keys, dK, dV and dQ by channels, P and dS in shared memory, one stage of Q and
# dO, every tile in 64-byte swizzles). It passed under the CPU interpreter and lowers for sm_90a
# (test_mosaic.py -k channel_split); no GPU has run it. First its GPU tests, then its speed
# against today's (Triton) backward on call 1's rows. One H200, about 8 minutes.
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
