# Session 56, call 3 (one H200, warm after call 2): `variants` fuzz from seed 6500.
source tools/gpu_env.sh
timeout -s KILL 500 python3 tools/dev/fuzz.py variants --seeds 6500:6700 --jobs 12 \
  --time-limit 430 2>&1 | grep -v "^W0000\|^I0000" > $OUT/3-fuzz-variants.txt
echo "variants rc $?"; grep -c "^ok" $OUT/3-fuzz-variants.txt
grep -v "^ok" $OUT/3-fuzz-variants.txt | tail -14; echo "done at $SECONDS s"
