# Session 59, call 1 (two H200s), kernels as session 58's (2aeeee5): `jax_nn` fuzz on a GPU for
# the first time (kvax.nn against jax.nn at "highest" precision, through the float32 kernels),
# then `variants` from seed 7600 and `sharded` from 5798 on both GPUs, each through gpu_fuzz
# (tools/gpu_env.sh): interrupted at its limit, it still prints its summary and fuzz.py's status.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
gpu_fuzz $OUT/1-jax_nn.txt 150 jax_nn --seeds 7000:7300 --jobs 24 --time-limit 110
gpu_fuzz $OUT/1-variants.txt 200 variants --seeds 7600:7800 --jobs 24 --time-limit 150
gpu_fuzz $OUT/1-sharded.txt $((540 - SECONDS)) sharded --platform gpu --seeds 5798:5850 \
  --time-limit $((500 - SECONDS))
echo "done at $SECONDS s"
