# Call 1 (session 45, one H200): the new GPU test (persistent workers capped to 1, 5 and 13 SMs,
# each running many programs), then the two trials written in session 44 to stop the ~400-cycle
# wait for the loads ahead (docs/bench/h200-2026-11-28-prologue/next-call.sh says how the copies
# are made): "~mov" (landed.patch) and "~tma" (tma.patch), beside HEAD. The small check on 5 SMs,
# then the check and rounds at full size (PTX dumped), then the timeline of both.
set -x
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
timeout -s KILL 150 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu -n 3 \
  packages/kvax-core/tests/test_mosaic.py -k many_programs \
  --kvax-report $OUT/h200-many-programs.md 2>&1 | tail -5
echo "at $SECONDS s"
C=64x128x2p,64x128x2p~mov,64x128x2p~tma
timeout -s KILL 90 python3 tools/dev/spike_mosaic.py --configs $C --sms 5 2>&1 \
  | grep -v "^W0000\|^I0000" > $OUT/1-check-sms5.txt
echo "rc $? at $SECONDS s"; grep "WRONG\|FAILED\|check\|rror" $OUT/1-check-sms5.txt | tail -6
mkdir -p /tmp/dump
MOSAIC_GPU_DUMP_TO=/tmp/dump MOSAIC_GPU_DUMP_PTX=1 timeout -s KILL $((450 - SECONDS)) python3 \
  tools/dev/spike_mosaic.py --configs $C --rows 2,1,0 --rounds 4 --repeats 10 --fa3 2>&1 \
  | grep -v "^W0000\|^I0000\|nvdisasm\|Source Location\|dump.cc" > $OUT/1-spike.txt
echo "rc $? at $SECONDS s"; grep "check\|FAILED\|rror" $OUT/1-spike.txt | tail -3
# (the dumps were empty: ~tma ended the process before its kernels were dumped)
mkdir -p $OUT/ptx; for e in 15 16 17; do gzip -c /tmp/dump/entry_$e.ptx > $OUT/ptx/entry_$e.ptx.gz; done
timeout -s KILL $((580 - SECONDS)) python3 tools/dev/profile_timeline.py \
  --configs 64x128x2p~mov,64x128x2p~tma --rows 2 --space 64 --out $OUT/timeline 2>&1 \
  | grep -v "^W0000\|^I0000" | tee $OUT/1-timeline.txt
echo "at $SECONDS s"
