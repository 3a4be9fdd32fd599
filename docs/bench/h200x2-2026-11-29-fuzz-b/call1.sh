# Session 54, call 1 (two H200s): more random cases through the kernels at c30e622 (kernels as
# 4877fe4's, checker with session 53's cancellation term): `variants` from seed 5800 (one GPU a
# process, against the float64 reference) and `sharded` from 5629, where session 53's stopped.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
timeout -s KILL 300 python3 tools/dev/fuzz.py variants --seeds 5800:5950 --jobs 12 \
  --time-limit 250 2>&1 | grep -v "^W0000\|^I0000" > $OUT/1-fuzz-variants.txt
echo "variants rc $?"; grep -c "^ok" $OUT/1-fuzz-variants.txt
grep -v "^ok" $OUT/1-fuzz-variants.txt | tail -8
timeout -s KILL $((540 - SECONDS)) python3 tools/dev/fuzz.py sharded --platform gpu \
  --seeds 5629:5729 --time-limit $((500 - SECONDS)) 2>&1 | grep -v "^W0000\|^I0000" \
  > $OUT/1-fuzz-sharded.txt
echo "sharded rc $?"; grep -c "^ok" $OUT/1-fuzz-sharded.txt
grep -v "^ok" $OUT/1-fuzz-sharded.txt | tail -8; echo "done at $SECONDS s"
