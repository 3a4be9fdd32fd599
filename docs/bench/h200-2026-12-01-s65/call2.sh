# Session 65, call 2 (one H200): 64-key tiles on masks of 64-key blocks (what the public API runs
# for FlashAttentionParamsConfig(128, 64)), against the default 128-key tiles and FA3. They were
# level on short documents on an H100 on 2026-11-24 (-1.8%), before the rank rule made masked
# steps cheaper; on 64k short documents they compute 7% fewer pairs (useful 0.640 against 0.593).
# First the small check of the 64-key configs on the GPU (--sms 132: the check alone), then rounds.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
timeout -s INT 150 python3 tools/dev/spike_mosaic.py --configs 64x64x2p,64x64x3p --sms 132 2>&1 \
  | grep -v "^[WI]0000 " > $OUT/2-check.txt
echo "check rc ${PIPESTATUS[0]}"; grep "WRONG\|FAIL\|^check" $OUT/2-check.txt; echo "at $SECONDS s"
timeout -s INT $((480 - SECONDS)) python3 tools/dev/spike_mosaic.py --rows 2,1,0 --skip-check \
  --layers 8 --configs 64x128x2p,64x64x2p,64x64x3p --rounds 8 --repeats 10 --fa3 2>&1 \
  | grep -v "^[WI]0000 " > $OUT/2-spike.txt
echo "spike rc ${PIPESTATUS[0]}"; grep "median\|FAIL" $OUT/2-spike.txt; echo "done at $SECONDS s"
