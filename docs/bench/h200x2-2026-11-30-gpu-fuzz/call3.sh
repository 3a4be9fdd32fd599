# Session 59, call 3 (two H200s, kept warm), kernels as call 1's: the session's last device time
# on `variants` from seed 8000 and `sharded` from 5849, where call 2 stopped.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
gpu_fuzz $OUT/3-variants.txt 270 variants --seeds 8000:8200 --jobs 24 --time-limit 220
gpu_fuzz $OUT/3-sharded.txt $((510 - SECONDS)) sharded --platform gpu --seeds 5849:5950 \
  --time-limit $((470 - SECONDS))
echo "done at $SECONDS s"
