# Call 5 (session 44, one H200, the session's last device time): the loads ahead through shared
# memory ("~smem", smem.patch on HEAD). HEAD's SASS (call 4's PTX through ptxas here) moves each
# value loaded for a later round into the loop's carried registers right after its load (the
# fori_loop's carry rotates), so the warp waits for the load there: the "ahead" range's 390-490
# cycles on consumer 0. Here a round's loads are written to each consumer's shared-memory slots
# after its program, when they have landed, and read back at the next round's top. The spike's
# small check (with PTX dumps of every kernel for their SASS here), then rounds on the short (2),
# log-normal (1) and 8-document (0) rows beside FA3.
set -x
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
mkdir -p /tmp/dump
MOSAIC_GPU_DUMP_TO=/tmp/dump MOSAIC_GPU_DUMP_PTX=1 timeout -s KILL 175 python3 \
  tools/dev/spike_mosaic.py --configs 64x128x2p,64x128x2p~smem --rows 2,1,0 --rounds 4 \
  --repeats 10 --fa3 2>&1 | grep -v "^W0000\|^I0000" > $OUT/5-spike.txt
echo "rc $? at $SECONDS s"; grep "check\|round" $OUT/5-spike.txt | tail -3
ls /tmp/dump | head -40
mkdir -p $OUT/ptx; for f in $(ls /tmp/dump/*.ptx | head -30); do gzip -c $f > $OUT/ptx/$(basename $f).gz; done
echo "at $SECONDS s"
