# Session 59, call 2 (two H200s), kernels as call 1's: more of each mode, on the seeds after
# call 1's ranges (sharded from 5824, where call 1 stopped).
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
gpu_fuzz $OUT/2-variants.txt 260 variants --seeds 7800:8000 --jobs 24 --time-limit 210
gpu_fuzz $OUT/2-jax_nn.txt 100 jax_nn --seeds 7300:7600 --jobs 24 --time-limit 60
gpu_fuzz $OUT/2-sharded.txt $((540 - SECONDS)) sharded --platform gpu --seeds 5824:5950 \
  --time-limit $((500 - SECONDS))
echo "done at $SECONDS s"
