# Call 2 (session 45, one H200): "~tma" again (tma2.patch, here: call 1's TMA copies read the
# work list from 4-byte aligned addresses and wrote 16-byte shared-memory slots; now each code's
# 16-byte aligned window of 4, into 128-byte slots). Its small check on 5 SMs alone (call 1's
# fault ended the process), then the check and rounds beside HEAD and "~mov" (landed.patch; call
# 1 checked it but its rounds never ran), then the timeline of "~tma" on short documents.
set -x
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
timeout -s KILL 90 python3 tools/dev/spike_mosaic.py --configs 64x128x2p~tma --sms 5 2>&1 \
  | grep -v "^W0000\|^I0000" | grep -v "^E1128" > $OUT/2-check-sms5.txt
echo "rc $? at $SECONDS s"; grep "WRONG\|FAILED\| ok$\|rror" $OUT/2-check-sms5.txt | head -6
C=64x128x2p,64x128x2p~mov
grep -q "FAILED\|rror" $OUT/2-check-sms5.txt || C=$C,64x128x2p~tma
timeout -s KILL $((420 - SECONDS)) python3 tools/dev/spike_mosaic.py --configs $C --rows 2,1,0 \
  --rounds 4 --repeats 10 --fa3 2>&1 | grep -v "^W0000\|^I0000\|^E1128" > $OUT/2-spike.txt
echo "rc $? at $SECONDS s"; grep "check\|FAILED\|rror" $OUT/2-spike.txt | tail -3
echo $C | grep -q tma && timeout -s KILL $((580 - SECONDS)) python3 tools/dev/profile_timeline.py \
  --configs 64x128x2p~tma --rows 2 --space 64 --out $OUT/timeline 2>&1 \
  | grep -v "^W0000\|^I0000" | tee $OUT/2-timeline.txt
echo "at $SECONDS s"
