# Session 60, call 1 (two H200s), kernels as session 58's (2aeeee5): the first GPU runs of the
# `mosaic` and `sharded_mosaic` fuzz modes (session 59 ran them on CPU only). On a GPU their ok
# lines name the kernels that ran, counted from the lowered custom calls ("[mosaic N]").
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
gpu_fuzz $OUT/1-mosaic.txt 300 mosaic --seeds 0:300 --jobs 24 --time-limit 250
gpu_fuzz $OUT/1-sharded_mosaic.txt $((540 - SECONDS)) sharded_mosaic --platform gpu \
  --seeds 0:100 --time-limit $((490 - SECONDS))
echo "done at $SECONDS s"
