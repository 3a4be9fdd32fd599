# Call 3 (session 40, one H200): the persistent forward with document chunks on rows of short
# documents too (MosaicConfig.short_chunks, "c"; short-chunks.patch), against the default
# (row-aligned tiles there) and FA3. The small check first (two new workloads take the chunks
# only with "c"), then the short row (2) in the spike's rounds, then single calls in turn on
# the short row and on log-normal documents (1: the same programs either way, a control).
set -x
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
timeout -s KILL 280 python3 tools/dev/spike_mosaic.py --configs 64x128x2p,64x128x2pc --rows 2 \
  --rounds 4 --repeats 10 --fa3 2>&1 | grep -v "^W0000\|^I0000" | tee $OUT/3-spike.txt
echo "at $SECONDS s"
timeout -s KILL $((560 - SECONDS)) python3 tools/dev/per_call.py --out /tmp/pc --rows 2,1 \
  --configs 64x128x2p,64x128x2pc --turns 40 --bursts 10 2>&1 \
  | grep -v "^W0000\|^I0000\|clock samples" | tee $OUT/3-percall.txt
