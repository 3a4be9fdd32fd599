# Call 4 (session 40, one H200): where the persistent forward's cycles go, program by program
# (profile_timeline.py's persistent summary: the first ~10 programs of each block, each
# consumer), on short documents (2), log-normal ones (1), 8 documents (0), one causal document (4).
set -x
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
timeout -s KILL 420 python3 tools/dev/profile_timeline.py --configs 64x128x2p --rows 2,1,0,4 \
  --space 64 --out $OUT/timeline 2>&1 | grep -v "^W0000\|^I0000" | tee $OUT/4-timeline.txt
ls -la $OUT/timeline
