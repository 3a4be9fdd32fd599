# Call 1 (session 42, 2 H200s): the Mosaic backward's masked steps on key ranks
# (BackwardConfig.rank_rule; by default where the forward mask's schedule brings the layouts).
# First the spike: both rules against the Triton backward on small odd shapes with NaN in the
# padding, then the backward alone in turn on 8-document, log-normal and short rows at 64k
# (the rank layouts built once outside the timed call, as the mask's schedule brings them).
# Then the GPU tests the change touches, then kvax-dist's suite on the pair.
set -x
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
timeout -s KILL 170 python3 tools/dev/spike_mosaic_bwd.py --configs 240/24,240/24r --rounds 3 \
  2>&1 | grep -v "^W0000\|^I0000" | tee $OUT/1-spike.txt
echo "at $SECONDS s"
timeout -s KILL $((470 - SECONDS)) python3 -m pytest -p kvax_testing.pytest_plugin -m gpu \
  packages/kvax-core/tests/test_mosaic.py -n 24 \
  -k "either_rule or schedule_from_the_mask or mosaic_backward_padding_exact \
or (mosaic_backward_matches_reference and default) or mosaic_backward_deterministic" \
  --kvax-report $OUT/h200-kvax-core-bwd-ranks.md 2>&1 | grep -v Warning | tail -8
echo "at $SECONDS s"
timeout -s INT $((590 - SECONDS)) python3 -m pytest -p kvax_testing.pytest_plugin \
  packages/kvax-dist --kvax-mesh-platform gpu -q -n 6 \
  --kvax-report $OUT/h200x2-kvax-dist-bwd-ranks.md > $OUT/1-dist.txt 2>&1
echo "dist rc $?"; tail -3 $OUT/1-dist.txt; echo "done at $SECONDS s"
