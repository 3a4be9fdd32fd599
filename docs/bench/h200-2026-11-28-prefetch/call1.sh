# Ran on an uncommitted trial whose MosaicConfig had the flags "a" (prefetch) and "b"
# (prefetch_deep); 725ae11 kept "ab" as the persistent forward's only order and dropped the
# flags, so the spike now refuses these names (README.md here).
# Call 1 (session 43, one H200): the persistent forward's consumers with their next programs'
# work codes and tables loaded a round ahead and the rows' layout issued before the prologue's
# waits (MosaicConfig.prefetch, "a"), against today's default ("p"), beside FA3. The small
# check first, then the short (2), log-normal (1) and 8-document (0) rows in the spike's rounds;
# then the program-by-program timeline of both on the short and log-normal rows; then single
# calls in turn.
set -x
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
timeout -s KILL 240 python3 tools/dev/spike_mosaic.py --configs 64x128x2p,64x128x2pa \
  --rows 2,1,0 --rounds 4 --repeats 10 --fa3 2>&1 | grep -v "^W0000\|^I0000" \
  | tee $OUT/1-spike.txt
echo "at $SECONDS s"
timeout -s KILL $((420 - SECONDS)) python3 tools/dev/profile_timeline.py \
  --configs 64x128x2p,64x128x2pa --rows 2,1 --space 64 --out $OUT/timeline 2>&1 \
  | grep -v "^W0000\|^I0000" | tee $OUT/1-timeline.txt
echo "at $SECONDS s"
timeout -s KILL $((570 - SECONDS)) python3 tools/dev/per_call.py --out /tmp/pc --rows 2,1 \
  --configs 64x128x2p,64x128x2pa --turns 40 --bursts 10 2>&1 \
  | grep -v "^W0000\|^I0000\|clock samples" | tee $OUT/1-percall.txt
echo "at $SECONDS s"
