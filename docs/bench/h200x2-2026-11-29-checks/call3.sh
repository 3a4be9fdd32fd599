# Call 3 (session 50, 2 H200s): the kvax-dist test changed after call 1 (the backward lowered
# ahead inside a mesh, now with Triton's kernels on GPUs), then every GPU test of test_mosaic,
# test_long and test_mosaic_cache on HEAD, as far as the call's time goes (no GPU has run all
# of them since sessions 46-49 changed how the kernels are lowered, compiled and kept); call 4
# runs the rest. The report of what ran is kept in /tmp for call 4, on the same machine.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout -s INT 100 python3 -m pytest -p kvax_testing.pytest_plugin --kvax-mesh-platform gpu \
  packages/kvax-dist/tests/test_sharded.py -k lowered_ahead -q \
  --kvax-report $OUT/h200x2-kvax-dist-lowered-ahead.md > $OUT/3-dist.txt 2>&1
echo "dist rc $?"; tail -1 $OUT/3-dist.txt; echo "at $SECONDS s"
timeout -s INT $((588 - SECONDS)) python3 -m pytest -p kvax_testing.pytest_plugin -m gpu \
  packages/kvax-core/tests/test_mosaic.py packages/kvax-core/tests/test_long.py \
  packages/kvax-core/tests/test_mosaic_cache.py -n 30 \
  --kvax-report $OUT/h200-kvax-core-mosaic-all-1.md > $OUT/3-mosaic.txt 2>&1
echo "mosaic rc $?"; tail -2 $OUT/3-mosaic.txt
cp $OUT/h200-kvax-core-mosaic-all-1.md /tmp/mosaic-all-1.md; echo "done at $SECONDS s"
