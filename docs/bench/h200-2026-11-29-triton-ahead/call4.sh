# Call 4 (session 49, one H200): random cases through the kernels at this session's code
# (fuzz.py variants, fresh seeds, 12 processes), then the first of those seeds again in new
# processes, which read every kernel (Mosaic and Triton) from kvax's disk cache the first ones
# wrote: a kernel cached under a key that misses one of its parameters would fail there.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
export KVAX_CACHE_DIR=/tmp/kvax-fuzz-cache
timeout -s KILL 300 python3 tools/dev/fuzz.py variants --seeds 4900:5200 --jobs 12 \
  --time-limit 200 2>&1 | grep -v "^W0000\|^I0000" > $OUT/4-fuzz.txt
echo "rc $?"; tail -3 $OUT/4-fuzz.txt
echo "at $SECONDS s; entries: $(ls $KVAX_CACHE_DIR | wc -l) triton, $(ls $KVAX_CACHE_DIR/mosaic 2>/dev/null | wc -l) mosaic"
timeout -s KILL 120 python3 tools/dev/fuzz.py variants --seeds 4900:4924 --jobs 12 \
  --time-limit 60 2>&1 | grep -v "^W0000\|^I0000" > $OUT/4-fuzz-from-disk.txt
echo "rc $?"; tail -3 $OUT/4-fuzz-from-disk.txt
echo "at $SECONDS s"
