source tools/gpu_env.sh
nvidia-smi -L; date +%T
# the sharded suite and the sharded fuzz on both GPUs (last run in session 30), one after the other
timeout -s INT 300 python3 -m pytest -p kvax_testing.pytest_plugin packages/kvax-dist --kvax-mesh-platform gpu -q -n 6 --kvax-report $OUT/h100x2-kvax-dist.md > $OUT/dist.txt 2>&1; echo "dist rc $?"
tail -3 $OUT/dist.txt; date +%T
timeout -s INT 200 python3 tools/dev/fuzz.py sharded --platform gpu --seeds 100:140 --time-limit 150 > $OUT/fuzz-sharded.txt 2>&1; echo "sharded fuzz rc $?"
tail -3 $OUT/fuzz-sharded.txt; date +%T
