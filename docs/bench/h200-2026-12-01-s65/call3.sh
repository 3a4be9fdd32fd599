# Session 65, call 3 (one H200; kernels unchanged): fuzz at this HEAD, with fuzz.py's corrected
# count of cases cut short: jax_nn on the GPU from seed 7600 (session 59 reached 7599), mosaic
# from 4600, variants from 15100.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
gpu_fuzz $OUT/3-jax_nn.txt 470 jax_nn --seeds 7600:8600 --jobs 6 --time-limit 400 &
gpu_fuzz $OUT/3-mosaic.txt 470 mosaic --seeds 4600:5600 --jobs 3 --time-limit 400 &
gpu_fuzz $OUT/3-variants.txt 470 variants --seeds 15100:16100 --jobs 4 --time-limit 400 &
wait; echo "done at $SECONDS s"
