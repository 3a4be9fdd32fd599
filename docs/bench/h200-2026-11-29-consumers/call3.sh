# Call 3 (session 52, one H200, run straight after call 2 with 257 s of device time left; the
# command as given to the device tool): the backward's static consumers again, 6 rounds on the
# bidirectional 16k document, 8 documents and log-normal ones, since call 1 read them level
# where session 52's call 6 (../h200-2026-11-29-owed) had read 1.7-2.3%.
source tools/gpu_env.sh; timeout -s KILL 230 python3 tools/dev/spike_det_bwd.py --layouts bidir16k,docs8,lognormal --configs "mosaic det" --variant "cons:static_consumers=1" --rounds 6 2>&1 | grep -v "^W0000\|^I0000" > $OUT/3-spike-bwd.txt; echo "rc $? at $SECONDS s"; grep -A8 "^median" $OUT/3-spike-bwd.txt
