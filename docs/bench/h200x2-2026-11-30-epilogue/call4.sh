# Session 58, call 4 (one H200, 16 cores, a fresh machine), kernels as call 1's: the session's
# last device time on `variants` fuzz from seed 7500.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
timeout -s KILL 190 python3 tools/dev/fuzz.py variants --seeds 7500:7600 --jobs 12 \
  --time-limit 150 2>&1 | grep -v "^W0000\|^I0000" > $OUT/4-fuzz-variants.txt
echo "variants rc $?"; echo "ok: $(grep -c '^ok' $OUT/4-fuzz-variants.txt)"
grep -v "^ok\|^stop\|^variants:" $OUT/4-fuzz-variants.txt | tail -8; echo "done at $SECONDS s"
