# Prepared in session 56, not yet run: the same on 8 documents (64k), then a second log-normal
# reading, for the spread.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
timeout -s INT 280 python3 tools/dev/spike_softcap.py --layers 8 --fixed --rounds 6 \
  --repeats 1 > $OUT/2-docs8.txt 2>&1
echo "rc $?"; tail -5 $OUT/2-docs8.txt; date +%T
timeout -s INT $((560 - SECONDS)) python3 tools/dev/spike_softcap.py --doc-median 1100 \
  --layers 8 --fixed --rounds 6 --repeats 1 > $OUT/2-lognormal.txt 2>&1
echo "rc $?"; tail -5 $OUT/2-lognormal.txt; date +%T
