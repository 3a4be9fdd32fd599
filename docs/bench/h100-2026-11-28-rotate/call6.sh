# Call 6 (session 39): the rotation on by default for bidirectional masks (BackwardConfig.rotate
# None), against it off (norot), on one bidirectional 16k document and 8 bidirectional
# documents at 64k; then the Mosaic backward's bidirectional GPU tests.
set -x
source tools/gpu_env.sh
timeout -s KILL 170 python3 tools/dev/spike_det_bwd.py --layouts bidir16k,docs8bidir \
  --configs "mosaic det,mosaic nondet" --variant "norot:rotate=0" --rounds 4 2>&1 \
  | grep -v "^W0000\|^I0000" | tee $OUT/6-spike-rotate-default.txt
timeout -s KILL 150 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu \
  packages/kvax-core/tests/test_mosaic.py -n 8 \
  -k "mosaic_backward_matches_reference and False" \
  --kvax-report $OUT/h100-kvax-core-mosaic-backward-rotate.md 2>&1 | tail -8
