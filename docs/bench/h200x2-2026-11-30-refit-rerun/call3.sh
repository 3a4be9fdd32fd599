# Session 62, call 3 (two H200s, call 2's machine): fuzz only, at df31a6b's launch layer:
# sharded_mosaic from seed 27, mosaic from 1700, variants from 10300.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
gpu_fuzz $OUT/3-sharded_mosaic.txt 470 sharded_mosaic --platform gpu --seeds 27:200 \
  --time-limit 420 &
gpu_fuzz $OUT/3-mosaic.txt 470 mosaic --seeds 1700:2600 --jobs 10 --time-limit 420 &
gpu_fuzz $OUT/3-variants.txt 470 variants --seeds 10300:11300 --jobs 8 --time-limit 420 &
wait; echo "done at $SECONDS s"
