# Session 57, call 4 (two H200s, a fresh machine), code as call 1's kernels: the session's last
# device time on more `variants` fuzz (random variants, caps among them) from seed 6900.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
timeout -s KILL 230 python3 tools/dev/fuzz.py variants --seeds 6900:7100 --jobs 24 \
  --time-limit 190 2>&1 | grep -v "^W0000\|^I0000" > $OUT/4-fuzz-variants.txt
echo "fuzz rc $?"; grep -c "^ok" $OUT/4-fuzz-variants.txt
grep -v "^ok" $OUT/4-fuzz-variants.txt | grep -v "^stop\|^variants:" | tail -8
grep "^variants:" $OUT/4-fuzz-variants.txt | awk '{p+=$4; f+=$6} END {print p" passed, "f" failed"}'
echo "done at $SECONDS s"
