# Prepared in session 68, not run. Two H200s, about 9 minutes: kvax-dist's Hopper-tiles test on
# both GPUs (its head-dim-256 cases, added in session 68, run the Mosaic channel split in each
# shard), then sharded_mosaic fuzz, one process on both GPUs (head dim 256 in a quarter of
# its cases).
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
timeout -s INT 200 python3 -m pytest -p kvax_testing.pytest_plugin packages/kvax-dist \
  --kvax-mesh-platform gpu -n 4 -k "hopper_tiles or lowered_ahead" \
  --kvax-report $OUT/h200x2-kvax-dist-hopper-tiles.md > $OUT/dist.txt 2>&1
echo "dist rc $? at $SECONDS s"; tail -n 3 $OUT/dist.txt
left=$((540 - SECONDS))
gpu_fuzz $OUT/sharded_mosaic.txt $left sharded_mosaic --platform gpu --seeds 300:400 \
  --time-limit $((left - 60))
echo "done at $SECONDS s"
