# Session 67's next-call.sh, as prepared: where the channel split's time goes at head dim 256
# (profile_timeline.py --backward --shape 16,8,256, rows 0 and 1), then fresh fuzz seeds through
# the kernels (`mosaic` draws head dim 256 in a quarter of its cases). One H200, about 9 minutes.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
timeout -s INT 200 python3 tools/dev/profile_timeline.py --backward --shape 16,8,256 --rows 0,1 \
  --out $OUT/profile 2>&1 | grep -v "^[WI]0000 " | tail -40
echo "profiled at $SECONDS s"
left=$((540 - SECONDS))
gpu_fuzz $OUT/mosaic.txt $left mosaic --seeds 6300:7800 --jobs 5 --time-limit $((left - 50)) &
gpu_fuzz $OUT/variants.txt $left variants --seeds 16800:17700 --jobs 2 --time-limit $((left - 50)) &
wait
echo "done at $SECONDS s"
