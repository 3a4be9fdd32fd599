# Call 2 (session 44, one H200): why the loads ahead (session 43) made the 8-document row 1-2%
# slower (call 1). Their values are live across each program's loop: 31 registers carried or in
# flight through the steps, against about 12 before. Two copies beside HEAD ("p") and the kernel
# before session 43 ("~old"), each carried as mosaic_fwd_ab_NAME.py (the patch in this
# directory: lean.patch on HEAD, TABLE_AHEAD True for "~lean", False for "~lean2"):
# "~lean": the same loads ahead, carried as work codes and decoded where used (20 registers);
# "~lean2": as lean, but each program's table loaded at the top of its round, not a round ahead.
# ptxas's report (spills) for each, the spike's check and rounds on rows 0, 2, 1, 4 beside FA3,
# then single calls in turn on rows 0 and 2.
set -x
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
MOSAIC_GPU_DUMP_PTXAS=1 timeout -s KILL 330 python3 tools/dev/spike_mosaic.py \
  --configs 64x128x2p,64x128x2p~old,64x128x2p~lean,64x128x2p~lean2 --rows 0,2,1,4 --rounds 4 \
  --repeats 10 --fa3 > $OUT/2-spike-full.txt 2>&1
echo "rc $? at $SECONDS s"
grep -E "spill stores|Used [0-9]+ registers" $OUT/2-spike-full.txt | grep -v warning | uniq -c
grep -vE "spill|ptxas|^ *$|Compiling|Function prop|bytes gmem|registers|^W0000|^I0000" \
  $OUT/2-spike-full.txt > $OUT/2-spike.txt
grep "round\|check" $OUT/2-spike.txt | tail -4
timeout -s KILL $((580 - SECONDS)) python3 tools/dev/per_call.py --out /tmp/pc --rows 0,2 \
  --configs 64x128x2p,64x128x2p~old,64x128x2p~lean,64x128x2p~lean2 --turns 20 --bursts 5 2>&1 \
  | grep -v "^W0000\|^I0000\|clock samples" | tee $OUT/2-percall.txt | grep -v "bursts'"
echo "at $SECONDS s"
