# Call 3 (session 44, two H200s): GPU checks at HEAD (5ab111d's kernels: session 43's named
# scopes in the persistent forward's prologue, the factor's load before the round's helpers,
# and mosaic_bwd.backward's rank layouts in one branch, none run on a GPU before): the forward's
# GPU tests through the whole API, kvax-dist's GPU suite on both GPUs, then the public
# benchmark's 8-document row chained beside FA3 (session 43 timed that row only in the spike).
set -x
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
timeout -s KILL 300 python3 -m pytest \
  -p kvax_testing.pytest_plugin -m gpu packages/kvax-core/tests/test_mosaic.py -n 24 \
  -k "either_rule or schedule_from_the_mask or document_chunks_bitwise \
or deterministic_and_padding_exact or test_matches_reference or mosaic_backward_padding_exact \
or auto_picks" --kvax-report $OUT/h200x2-kvax-core-head.md 2>&1 | grep -v Warning | tail -6
echo "at $SECONDS s"
timeout -s KILL $((420 - SECONDS)) python3 -m pytest -p kvax_testing.pytest_plugin \
  packages/kvax-dist --kvax-mesh-platform gpu -q -n 6 \
  --kvax-report $OUT/h200x2-kvax-dist-head.md > $OUT/3-dist.txt 2>&1
echo "dist rc $?"; tail -3 $OUT/3-dist.txt; echo "at $SECONDS s"
B="python3 tools/bench.py mha_bwd --repeats 1 --layers 8 --also-backends auto:nondeterministic --peer-timeout 150 --seq-lens 65536"
timeout -s INT $((590 - SECONDS)) $B --out /tmp/bo/docs8 --rounds 12 --peers fa3 \
  --num-segments 8 --num-pad-tokens 2000 > $OUT/bench-docs8.txt 2>&1
echo "bench rc $?"; cp /tmp/bo/docs8/results.json $OUT/docs8-results.json
grep -A7 "allowed pairs" $OUT/bench-docs8.txt | head -9
echo "done at $SECONDS s"
