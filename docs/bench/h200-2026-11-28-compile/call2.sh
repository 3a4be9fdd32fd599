# Call 2 (session 46, one H200): the kernels compiled ahead (prewarm.py) on and off, fresh
# processes in turns, 64k tokens of log-normal documents, forward+backward: first under the
# profiler (compile_profile.py), then first_call.py's cold processes beside the Triton step.
set -x
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
P="python3 tools/dev/compile_profile.py --doc-median 1100 --min-ms 100"
for i in 1 2; do
  for w in 1 0; do
    KVAX_PREWARM=$w $P --backend auto --out $OUT/p$w-$i > $OUT/2-prof-prewarm$w-$i.txt 2>&1
    echo "rc $?"; head -1 $OUT/2-prof-prewarm$w-$i.txt; grep -E " (Compile|lower_sharding_computation)$" $OUT/2-prof-prewarm$w-$i.txt
  done
done
F="python3 tools/first_call.py --doc-median 1100 --processes 1"
for i in 1 2 3; do
  for c in "auto 1" "auto 0" "triton 1"; do
    set -- $c
    KVAX_PREWARM=$2 timeout -s INT 100 $F --backend $1 --out $OUT/fc-$1-$2-$i > $OUT/2-fc-$1-prewarm$2-$i.txt 2>&1
    echo "rc $? $1 prewarm=$2: $(tail -1 $OUT/2-fc-$1-prewarm$2-$i.txt)"
  done
done
echo "at $SECONDS s"
