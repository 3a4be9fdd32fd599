# Call 1 (session 44, one H200): session 43's kept change (the persistent forward's loads one
# to three rounds ahead, 725ae11) against the kernel before it, in one process: "~old" is
# mosaic_fwd.py at 725ae11^ copied to mosaic_fwd_ab_old.py (spike_mosaic's "~NAME"), carried.
# The spike's small check, then rounds on the 8-document (0), causal 64k (4), log-normal (1) and
# short (2) rows beside FA3 (session 43 timed the 8-document row only on a noisy machine); then
# the timeline at HEAD with the prologue's store_read and meet split out; then single calls in
# turn on rows 0 and 4.
set -x
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
timeout -s KILL 280 python3 tools/dev/spike_mosaic.py --configs 64x128x2p,64x128x2p~old \
  --rows 0,4,1,2 --rounds 4 --repeats 10 --fa3 2>&1 | grep -v "^W0000\|^I0000" \
  | tee $OUT/1-spike.txt
echo "at $SECONDS s"
timeout -s KILL $((420 - SECONDS)) python3 tools/dev/profile_timeline.py \
  --configs 64x128x2p --rows 2,1 --space 64 --out $OUT/timeline 2>&1 \
  | grep -v "^W0000\|^I0000" | tee $OUT/1-timeline.txt
echo "at $SECONDS s"
timeout -s KILL $((580 - SECONDS)) python3 tools/dev/per_call.py --out /tmp/pc --rows 0,4 \
  --configs 64x128x2p,64x128x2p~old --turns 20 --bursts 5 2>&1 \
  | grep -v "^W0000\|^I0000\|clock samples" | tee $OUT/1-percall.txt
echo "at $SECONDS s"
