# Call 4 (session 45, one H200): a cold first call at HEAD, Mosaic ("auto") against Triton,
# three fresh processes each in turns (the README's "First call" table was measured on H100s on
# 2026-11-27, before the loads ahead and the ranks' one sort): 64k tokens of log-normal
# documents, forward+backward, the layout passed as arguments.
set -x
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
F="python3 tools/first_call.py --doc-median 1100 --processes 1"
for i in 1 2 3; do
  for c in auto triton; do
    timeout -s INT 100 $F --backend $c --out $OUT/fc-$c-$i > $OUT/fc-$c-$i.txt 2>&1
    echo "rc $? $c: $(tail -1 $OUT/fc-$c-$i.txt)"
  done
done
echo "at $SECONDS s"
