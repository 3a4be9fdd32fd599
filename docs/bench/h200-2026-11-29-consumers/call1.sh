# Call 1 (session 52, one H200, after the owed calls 5-7 in ../h200-2026-11-29-owed): first the
# one Mosaic backward GPU test call 5 did not reach before its time limit; then each consumer
# warpgroup's code emitted apart in the forward too (MosaicConfig.static_consumers, "g" in
# spike_mosaic.py; bitwise the default under the interpreter on CPU), the spike's small check
# against the reference and rounds beside FA3 on 8 documents, log-normal and short ones and one
# bidirectional 16k document; then the backward's static_consumers (1.7-2.3% in call 6) with
# deterministic=False too, on the bidirectional 16k document, log-normal and 8 documents.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
timeout -s KILL 150 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu -n 1 \
  packages/kvax-core/tests/test_mosaic.py -k "mosaic_backward_other_shapes and S384" \
  --kvax-report $OUT/h200-kvax-core-bwd-last.md > $OUT/1-test.txt 2>&1
echo "rc $? at $SECONDS s"; grep -m2 "exit status\|totals" $OUT/h200-kvax-core-bwd-last.md
timeout -s KILL 250 python3 tools/dev/spike_mosaic.py --configs 64x128x2p,64x128x2pg \
  --rows 0,1,2,5 --rounds 4 --repeats 10 --fa3 2>&1 | grep -v "^W0000\|^I0000" \
  > $OUT/1-spike-fwd.txt
echo "rc $? at $SECONDS s"; grep -i "check\|median\|64x128" $OUT/1-spike-fwd.txt | tail -30
timeout -s KILL $((585 - SECONDS)) python3 tools/dev/spike_det_bwd.py \
  --layouts bidir16k,lognormal,docs8 --configs "mosaic det,mosaic nondet" \
  --variant "cons:static_consumers=1" --variant "cons-nd:static_consumers=1,deterministic=0" \
  --rounds 4 2>&1 | grep -v "^W0000\|^I0000" > $OUT/1-spike-bwd.txt
echo "rc $? at $SECONDS s"; grep -A14 "^median" $OUT/1-spike-bwd.txt
