# Call 3 (session 42, the same H200, warm): random cases through the kernels with the one-sort
# intervals (fuzz.py variants: random ids, positions, padding, variants), new seeds.
source tools/gpu_env.sh >/dev/null 2>&1
timeout -s KILL 200 python3 tools/dev/fuzz.py variants --seeds 2000:2100 --jobs 8 \
  --time-limit 170 2>&1 | grep -v "^W0000\|^I0000" | tee $OUT/3-fuzz.txt | tail -25
echo "done at $SECONDS s"
