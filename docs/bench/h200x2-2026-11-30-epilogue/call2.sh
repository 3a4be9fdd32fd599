# Session 58, call 2 (two H200s), code at 2aeeee5's kernels: `variants` fuzz from seed 7100
# (random variants, caps among them), then `sharded` fuzz from 5750 on both GPUs.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
timeout -s KILL 330 python3 tools/dev/fuzz.py variants --seeds 7100:7300 --jobs 24 \
  --time-limit 290 2>&1 | grep -v "^W0000\|^I0000" > $OUT/2-fuzz-variants.txt
echo "variants rc $?"; grep -c "^ok" $OUT/2-fuzz-variants.txt
grep -v "^ok" $OUT/2-fuzz-variants.txt | grep -v "^stop\|^variants:" | tail -8
grep "^variants:" $OUT/2-fuzz-variants.txt | awk '{p+=$4; f+=$6} END {print p" passed, "f" failed"}'
timeout -s KILL $((540 - SECONDS)) python3 tools/dev/fuzz.py sharded --platform gpu \
  --seeds 5750:5900 --time-limit $((510 - SECONDS)) 2>&1 | grep -v "^W0000\|^I0000" \
  > $OUT/2-fuzz-sharded.txt
echo "sharded rc $?"; grep -c "^ok" $OUT/2-fuzz-sharded.txt
grep -v "^ok" $OUT/2-fuzz-sharded.txt | tail -6; echo "done at $SECONDS s"
