# Call 1 (session 46, one H200): where a cold first call's XLA compile goes, under jax's profiler
# (host ranges only): the Mosaic step ("auto") twice and the Triton one once, fresh processes,
# 64k tokens of log-normal documents, forward+backward, the layout passed as arguments.
set -x
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
P="python3 tools/dev/compile_profile.py --doc-median 1100 --min-ms 30"
$P --backend auto --out $OUT/a1 > $OUT/1-auto-1.txt 2>&1; echo "rc $?"; head -60 $OUT/1-auto-1.txt
$P --backend triton --out $OUT/t1 > $OUT/1-triton-1.txt 2>&1; echo "rc $?"; head -40 $OUT/1-triton-1.txt
$P --backend auto --out $OUT/a2 > $OUT/1-auto-2.txt 2>&1; echo "rc $?"; head -3 $OUT/1-auto-2.txt
echo "at $SECONDS s"
