# Call 5 (session 45, one H200): call 4 again with Triton's own cache emptied too (first_call.py
# now points TRITON_CACHE_DIR into its fresh directory: in call 4 the Triton processes after the
# first read kernels from gpu_env.sh's /tmp/tc), three fresh processes each in turns: 64k tokens
# of log-normal documents, forward+backward, the layout passed as arguments.
set -x
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
F="python3 tools/first_call.py --doc-median 1100 --processes 1"
for i in 1 2 3; do
  for c in auto triton; do
    timeout -s INT 100 $F --backend $c --out $OUT/fc5-$c-$i > $OUT/fc5-$c-$i.txt 2>&1
    echo "rc $? $c: $(tail -1 $OUT/fc5-$c-$i.txt)"
  done
done
echo "at $SECONDS s"
