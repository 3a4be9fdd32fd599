# Session 53, call 1 (two H200s): random cases through the kernels with fresh seeds at 5a96165's
# kernels (the same sources as 4877fe4's): `variants` (flash_attention on the GPU against the
# float64 reference, one GPU per process) and `sharded` (the GPUs' mesh against one device).
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
timeout -s KILL 300 python3 tools/dev/fuzz.py variants --seeds 5600:5700 --jobs 12 \
  --time-limit 250 2>&1 | grep -v "^W0000\|^I0000" > $OUT/1-fuzz-variants.txt
echo "variants rc $?"; tail -3 $OUT/1-fuzz-variants.txt
timeout -s KILL $((540 - SECONDS)) python3 tools/dev/fuzz.py sharded --platform gpu \
  --seeds 5600:5700 --time-limit $((500 - SECONDS)) 2>&1 | grep -v "^W0000\|^I0000" \
  > $OUT/1-fuzz-sharded.txt
echo "sharded rc $?"; tail -3 $OUT/1-fuzz-sharded.txt; echo "done at $SECONDS s"
