# Call 4 (session 44, one H200): where the gap between two programs goes (520-640 cycles from
# each consumer's third program on, call 1). Two copies carry a named range "ahead" around the
# loads for later rounds (profile_timeline takes it out of the gap): "~ahead" is HEAD with it
# (ahead.patch), "~lean2s" call 2's lean2 with it (lean.patch with TABLE_AHEAD False, then
# lean2s-on-lean2.patch: there the range holds the round's own table loads). First the PTX of
# HEAD's forward (short row), for its SASS on the development machine (Triton's ptxas and
# cuobjdump), then the timelines of both copies on the short (2) and 8-document (0) rows.
set -x
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
mkdir -p /tmp/dump
MOSAIC_GPU_DUMP_TO=/tmp/dump MOSAIC_GPU_DUMP_PTX=1 timeout -s KILL 90 python3 \
  tools/dev/spike_mosaic.py --skip-check --configs 64x128x2p --rows 2 --repeats 2 > $OUT/4-dump.txt 2>&1
echo "rc $? at $SECONDS s"; ls -la /tmp/dump | head
for f in /tmp/dump/*.ptx; do gzip -c $f > $OUT/$(basename $f).gz; done
timeout -s KILL $((400 - SECONDS)) python3 tools/dev/profile_timeline.py \
  --configs 64x128x2p~ahead,64x128x2p~lean2s --rows 2,0 --space 64 --out $OUT/timeline 2>&1 \
  | grep -v "^W0000\|^I0000" | tee $OUT/4-timeline.txt
echo "at $SECONDS s"
