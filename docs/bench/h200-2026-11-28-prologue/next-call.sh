# Not run yet (written in session 44 after its device time was spent): the loads ahead read
# through an opaque PTX mov after each program ("~mov": landed.patch on HEAD, as
# mosaic_fwd_ab_mov.py, carried). The mov is a side effect, so neither LLVM nor ptxas hoists
# the carried registers' copies above the program: the warp should wait for the loads there,
# after they have landed, not right after issuing them (call 4: ~400 cycles a program).
# Lowers on CPU (spike_mosaic.py --lower-only). Its ranges "ahead" and "landed" are named for
# the timeline. First the spike's check (two rounds per worker on the sixth workload) with the
# PTX dumped, then rounds beside HEAD and FA3, then the timeline.
set -x
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
mkdir -p /tmp/dump
MOSAIC_GPU_DUMP_TO=/tmp/dump MOSAIC_GPU_DUMP_PTX=1 timeout -s KILL 200 python3 \
  tools/dev/spike_mosaic.py --configs 64x128x2p,64x128x2p~mov --rows 2,1,0 --rounds 4 \
  --repeats 10 --fa3 2>&1 | grep -v "^W0000\|^I0000\|nvdisasm\|Source Location\|dump.cc" \
  > $OUT/6-spike.txt
echo "rc $? at $SECONDS s"; grep "check\|FAILED" $OUT/6-spike.txt | tail -3
mkdir -p $OUT/ptx; for e in 10 11; do gzip -c /tmp/dump/entry_$e.ptx > $OUT/ptx/entry_$e.ptx.gz; done
timeout -s KILL $((420 - SECONDS)) python3 tools/dev/profile_timeline.py \
  --configs 64x128x2p~mov --rows 2,0 --space 64 --out $OUT/timeline 2>&1 \
  | grep -v "^W0000\|^I0000" | tee $OUT/6-timeline.txt
echo "at $SECONDS s"
