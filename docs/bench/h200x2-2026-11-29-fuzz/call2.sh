# Session 53, call 2 (one H200): call 1's one failure, `variants` seed 5658 (T = S = 2, one-token
# documents, float32, the Triton kernels: dq and dk 3e-7 where the reference has exactly 0,
# against a bound of 1e-9) again after 898c3db, whose checker allows the float32 rounding of
# dS's terms before they cancel; then the seeds call 1's time limit left, as far as time goes.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
timeout -s KILL 120 python3 tools/dev/fuzz.py variants --seeds 5658:5659 2>&1 \
  | grep -v "^W0000\|^I0000" > $OUT/2-fuzz-5658.txt; echo "rc $?"; cat $OUT/2-fuzz-5658.txt
timeout -s KILL $((330 - SECONDS)) python3 tools/dev/fuzz.py variants --seeds 5700:5800 \
  --jobs 12 --time-limit $((300 - SECONDS)) 2>&1 | grep -v "^W0000\|^I0000" \
  > $OUT/2-fuzz-variants.txt; echo "rc $?"; grep -c "^ok" $OUT/2-fuzz-variants.txt
grep -v "^ok\|^stop" $OUT/2-fuzz-variants.txt | head -20; echo "done at $SECONDS s"
