# Ran on an uncommitted trial whose MosaicConfig had the flags "a" (prefetch) and "b"
# (prefetch_deep); 725ae11 kept "ab" as the persistent forward's only order and dropped the
# flags, so the spike now refuses these names (README.md here).
# Call 2 (session 43, one H200): call 1's prefetch ("a") and a deeper one ("ab",
# MosaicConfig.prefetch_deep: round r loads round r + 3's code, r + 2's program and first block
# and r + 1's table before its program, and the logits' factor is loaded once per worker),
# against today's default ("p"), beside FA3: the spike's check and rounds on the short (2),
# log-normal (1) and 8-document (0) rows; the deep one's timeline; single calls in turn.
set -x
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
timeout -s KILL 260 python3 tools/dev/spike_mosaic.py --configs 64x128x2p,64x128x2pa,64x128x2pab \
  --rows 2,1,0 --rounds 4 --repeats 10 --fa3 2>&1 | grep -v "^W0000\|^I0000" \
  | tee $OUT/2-spike.txt
echo "at $SECONDS s"
timeout -s KILL $((360 - SECONDS)) python3 tools/dev/profile_timeline.py \
  --configs 64x128x2pab --rows 2,1 --space 64 --out $OUT/timeline 2>&1 \
  | grep -v "^W0000\|^I0000" | tee $OUT/2-timeline.txt
echo "at $SECONDS s"
timeout -s KILL $((540 - SECONDS)) python3 tools/dev/per_call.py --out /tmp/pc --rows 2,1 \
  --configs 64x128x2p,64x128x2pab --turns 40 --bursts 10 2>&1 \
  | grep -v "^W0000\|^I0000\|clock samples" | tee $OUT/2-percall.txt
echo "at $SECONDS s"
