# Call 2 (session 50, 2 H200s): warm and cold first calls of the default (Mosaic) step before
# and after dd9caca in turns (one-trace-at-362c3c3.patch reversed gives the wiring before it;
# first_call.py runs each on one GPU), then random cases through the kernels with both GPUs
# (fuzz.py sharded --platform gpu: meshes of the two GPUs against one device), fresh seeds.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
P=docs/bench/h200-2026-11-29-triton-ahead/one-trace-at-362c3c3.patch
for round in 1 2 3; do
  for v in $( [ $((round % 2)) = 1 ] && echo "after before" || echo "before after" ); do
    [ $v = before ] && git apply -R $P
    timeout 80 python3 tools/first_call.py --doc-median 1100 --processes 2 --out /tmp/fc 2>&1 \
      | tail -2 | sed "s/^/$v /"
    [ $v = before ] && git apply $P
  done
done > $OUT/2-first-calls.txt
cat $OUT/2-first-calls.txt
echo "at $SECONDS s"
timeout -s KILL $((580 - SECONDS)) python3 tools/dev/fuzz.py sharded --platform gpu \
  --seeds 5200:5500 --jobs 6 --time-limit $((540 - SECONDS)) 2>&1 | grep -v "^W0000\|^I0000" > $OUT/2-fuzz.txt
echo "rc $?"; tail -3 $OUT/2-fuzz.txt; echo "done at $SECONDS s"
