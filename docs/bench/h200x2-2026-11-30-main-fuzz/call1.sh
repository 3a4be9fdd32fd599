# Session 56, call 1 (two H200s), code at f403645 (kernels as 3af9433's): the README's main job
# as a new user runs it (`tools/bench.py`, no arguments: 16k and 64k, 3 documents and padding,
# every peer), then random cases through the kernels with fresh seeds: `sharded` on both GPUs
# from 5671 (where session 54's stopped), `variants` from 6300 (session 55 ran 6100:6300).
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
timeout -s INT 260 python3 tools/bench.py --out /tmp/bo/main > $OUT/1-main-job.txt 2>&1
echo "main job rc $?"; cp /tmp/bo/main/results.json $OUT/1-main-results.json
grep -B2 -A12 "allowed pairs" $OUT/1-main-job.txt | head -40; echo "at $SECONDS s"
timeout -s KILL $((400 - SECONDS)) python3 tools/dev/fuzz.py sharded --platform gpu \
  --seeds 5671:5771 --time-limit $((370 - SECONDS)) 2>&1 | grep -v "^W0000\|^I0000" \
  > $OUT/1-fuzz-sharded.txt
echo "sharded rc $?"; grep -c "^ok" $OUT/1-fuzz-sharded.txt
grep -v "^ok" $OUT/1-fuzz-sharded.txt | tail -6; echo "at $SECONDS s"
timeout -s KILL $((560 - SECONDS)) python3 tools/dev/fuzz.py variants --seeds 6300:6500 \
  --jobs 24 --time-limit $((490 - SECONDS)) 2>&1 | grep -v "^W0000\|^I0000" \
  > $OUT/1-fuzz-variants.txt
echo "variants rc $?"; grep -c "^ok" $OUT/1-fuzz-variants.txt
grep -v "^ok" $OUT/1-fuzz-variants.txt | tail -8; echo "done at $SECONDS s"
