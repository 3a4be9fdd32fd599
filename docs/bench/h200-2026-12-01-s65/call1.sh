# Session 65, call 1 (one H200; kernels unchanged since 3333a18): spike_mosaic's rounds now run
# through measure.in_turns (b86eaec), checked here on the GPU with FA3 beside the default
# persistent forward (a same-call reading of the three packed rows); then fuzz at this HEAD.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
timeout -s INT 300 python3 tools/dev/spike_mosaic.py --rows 2,1,0 --skip-check --layers 8 \
  --configs 64x128x2p --rounds 8 --repeats 10 --fa3 2>&1 \
  | grep -v "^[WI]0000 " > $OUT/1-spike.txt
echo "spike rc ${PIPESTATUS[0]}"; grep "median\|FAIL" $OUT/1-spike.txt; echo "at $SECONDS s"
left=$((570 - SECONDS))
gpu_fuzz $OUT/1-variants.txt $left variants --seeds 14300:15300 --jobs 4 \
  --time-limit $((left - 60)) &
gpu_fuzz $OUT/1-mosaic.txt $left mosaic --seeds 3600:4600 --jobs 3 \
  --time-limit $((left - 60)) &
wait; echo "done at $SECONDS s"
