# Call 3 (session 43, two H200s): at 725ae11 (the persistent forward's loads a round ahead, and
# session 42's one in_intervals for both kernels, untested on a GPU until now): the forward's
# GPU tests that run it through the whole API (either rule, the mask's schedule against the
# built one, the chunks, padding and determinism, the reference on every shape, the backward's
# padding), kvax-dist's GPU suite on both GPUs, then the public benchmark's short row chained
# beside FA3 and FlexAttention.
set -x
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
timeout -s KILL 300 python3 -m pytest \
  -p kvax_testing.pytest_plugin -m gpu packages/kvax-core/tests/test_mosaic.py -n 24 \
  -k "either_rule or schedule_from_the_mask or document_chunks_bitwise \
or deterministic_and_padding_exact or test_matches_reference or mosaic_backward_padding_exact \
or auto_picks" --kvax-report $OUT/h200x2-kvax-core-prefetch.md 2>&1 | grep -v Warning | tail -6
echo "at $SECONDS s"
timeout -s KILL $((420 - SECONDS)) python3 -m pytest -p kvax_testing.pytest_plugin \
  packages/kvax-dist --kvax-mesh-platform gpu -q -n 6 \
  --kvax-report $OUT/h200x2-kvax-dist-prefetch.md > $OUT/3-dist.txt 2>&1
echo "dist rc $?"; tail -3 $OUT/3-dist.txt; echo "at $SECONDS s"
B="python3 tools/bench.py mha_bwd --repeats 1 --layers 8 --also-backends auto:nondeterministic --peer-timeout 150 --seq-lens 65536"
timeout -s INT $((590 - SECONDS)) $B --out /tmp/bo/short --rounds 12 --peers fa3,flex \
  --num-pad-tokens 1000 --doc-median 190 > $OUT/bench-short.txt 2>&1
echo "bench rc $?"; cp /tmp/bo/short/results.json $OUT/short-results.json
grep -A7 "allowed pairs" $OUT/bench-short.txt | head -9
echo "done at $SECONDS s"
