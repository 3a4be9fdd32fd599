# Session 56, call 2 (one H200, a fresh machine): the README's main job alone, as a new user runs
# it (`tools/bench.py`, no arguments), to see how long it takes from cold caches. In call 1 it
# had not finished its first (16k) row in 260 s: FlexAttention's process took 212 s.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
timeout -s INT 585 python3 tools/bench.py --out /tmp/bo/main > $OUT/2-main-job.txt 2>&1
echo "main job rc $? at $SECONDS s"; cp /tmp/bo/main/results.json $OUT/2-main-results.json
cp /tmp/bo/main/*.png $OUT/ 2>/dev/null
grep -v "^W0000\|^I0000" $OUT/2-main-job.txt | grep -v "^  File\|^    " | tail -40
