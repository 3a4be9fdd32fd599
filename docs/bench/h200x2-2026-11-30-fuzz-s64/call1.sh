# Session 64, call 5 (two H200s): the session's last device time as fuzz at its final kernels
# (3333a18's; the consumer_tiles trial removed): sharded_mosaic on both GPUs from seed 39 on
# (session 63 reached 38) and variants from seed 13300 on.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
gpu_fuzz $OUT/1-sharded_mosaic.txt 240 sharded_mosaic --platform gpu --seeds 39:200 \
  --time-limit 200 &
gpu_fuzz $OUT/1-variants.txt 240 variants --seeds 13300:14300 --jobs 8 --time-limit 200 &
wait; echo "done at $SECONDS s"
