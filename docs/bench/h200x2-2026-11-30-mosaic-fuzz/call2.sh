# Session 60, call 2 (one H200), at 6bf605a: the Triton kernels' stages fit to shared memory.
# The 8 mosaic seeds that failed at launch in call 1 (128x64 or 256x64 blocks, head dim 128: the
# Triton backward at 3 stages asked 232960 bytes) run again, each alone, beside the new GPU test
# of larger blocks (test_large_blocks_fit_shared_memory) and the head-dim test of the default
# blocks; then fresh mosaic seeds from 300.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
for s in 14 25 26 51 100 139 189 250; do
  gpu_fuzz $OUT/2-mosaic-$s.txt 300 mosaic --seeds $s:$((s + 1)) > $OUT/2-mosaic-$s.rc 2>&1 &
done
timeout -s INT 280 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu \
  packages/kvax-core/tests/test_attention.py -k "large_blocks or head_dims_with_device_defaults" \
  -n 6 --kvax-report $OUT/h200-large-blocks.md > $OUT/2-pytest.txt 2>&1
echo "pytest rc $?"; tail -3 $OUT/2-pytest.txt
wait; cat $OUT/2-mosaic-*.rc; echo "at $SECONDS s"
gpu_fuzz $OUT/2-mosaic.txt $((550 - SECONDS)) mosaic --seeds 300:600 --jobs 12 \
  --time-limit $((500 - SECONDS))
echo "done at $SECONDS s"
