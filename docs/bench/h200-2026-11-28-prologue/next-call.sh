# Not run yet (written in session 44 after its device time was spent): two ways to stop the
# wait for the loads ahead (call 4: ~400 cycles a program), each a copy of HEAD's mosaic_fwd.py
# carried as mosaic_fwd_ab_NAME.py (carry both):
# "~mov" (landed.patch): the loaded values read through one side-effecting PTX mov after each
#   program, so that the carried registers' copies wait there, once the loads have landed;
# "~tma" (tma.patch): the work codes and table rows (padded to 8 entries) copied by TMA into each
#   consumer's shared-memory slots rounds ahead, on barriers: no register holds them until read.
# Make the copies on the development machine, then carry them with .whl:
#   A=packages/kvax-core/src/kvax/_src/attention P=docs/bench/h200-2026-11-28-prologue
#   cp $A/mosaic_fwd.py $A/mosaic_fwd_ab_mov.py && patch $A/mosaic_fwd_ab_mov.py $P/landed.patch
#   cp $A/mosaic_fwd.py $A/mosaic_fwd_ab_tma.py && patch $A/mosaic_fwd_ab_tma.py $P/tma.patch
# Both lower on CPU for every check workload, with 5 SMs too. First the small check on 5 SMs
# (each worker then runs many programs; HEAD beside them), then the check and rounds at full
# size with the PTX dumped, then the timeline of both.
set -x
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
C=64x128x2p,64x128x2p~mov,64x128x2p~tma
timeout -s KILL 120 python3 tools/dev/spike_mosaic.py --configs $C --sms 5 2>&1 \
  | grep -v "^W0000\|^I0000" > $OUT/6-check-sms5.txt
echo "rc $? at $SECONDS s"; grep "WRONG\|FAILED\|check" $OUT/6-check-sms5.txt | tail -4
mkdir -p /tmp/dump
MOSAIC_GPU_DUMP_TO=/tmp/dump MOSAIC_GPU_DUMP_PTX=1 timeout -s KILL $((360 - SECONDS)) python3 \
  tools/dev/spike_mosaic.py --configs $C --rows 2,1,0 --rounds 4 --repeats 10 --fa3 2>&1 \
  | grep -v "^W0000\|^I0000\|nvdisasm\|Source Location\|dump.cc" > $OUT/6-spike.txt
echo "rc $? at $SECONDS s"; grep "check\|FAILED" $OUT/6-spike.txt | tail -3
mkdir -p $OUT/ptx; for e in 15 16 17; do gzip -c /tmp/dump/entry_$e.ptx > $OUT/ptx/entry_$e.ptx.gz; done
timeout -s KILL $((560 - SECONDS)) python3 tools/dev/profile_timeline.py \
  --configs 64x128x2p~mov,64x128x2p~tma --rows 2 --space 64 --out $OUT/timeline 2>&1 \
  | grep -v "^W0000\|^I0000" | tee $OUT/6-timeline.txt
echo "at $SECONDS s"
