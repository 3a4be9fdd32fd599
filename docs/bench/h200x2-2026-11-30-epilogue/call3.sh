# Session 58, call 3 (two H200s, a fresh machine), kernels as call 1's: the session's last device
# time on more random cases through the kernels: `variants` from seed 7300, then `sharded` from
# 5778 (where call 2 stopped) on both GPUs. Passed cases are counted from the `ok` lines; the
# per-process summaries are printed only by processes that stop before the KILL.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
timeout -s KILL 300 python3 tools/dev/fuzz.py variants --seeds 7300:7500 --jobs 24 \
  --time-limit 250 2>&1 | grep -v "^W0000\|^I0000" > $OUT/3-fuzz-variants.txt
echo "variants rc $?"; echo "ok: $(grep -c '^ok' $OUT/3-fuzz-variants.txt)"
grep -v "^ok\|^stop\|^variants:" $OUT/3-fuzz-variants.txt | tail -8
timeout -s KILL $((480 - SECONDS)) python3 tools/dev/fuzz.py sharded --platform gpu \
  --seeds 5778:5900 --time-limit $((450 - SECONDS)) 2>&1 | grep -v "^W0000\|^I0000" \
  > $OUT/3-fuzz-sharded.txt
echo "sharded rc $?"; echo "ok: $(grep -c '^ok' $OUT/3-fuzz-sharded.txt)"
grep -v "^ok" $OUT/3-fuzz-sharded.txt | tail -6; echo "done at $SECONDS s"
