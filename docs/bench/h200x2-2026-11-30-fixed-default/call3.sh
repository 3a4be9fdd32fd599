# Session 57, call 3 (two H200s), code at a4246ed: the cap's cost on 8 documents (64k, 8 chained
# calls) on the new default against --maxima, then `sharded` fuzz from seed 5689 on both GPUs.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
timeout -s INT 170 python3 tools/dev/spike_softcap.py --layers 8 --maxima --rounds 6 \
  --repeats 1 > $OUT/3-docs8.txt 2>&1
echo "rc $?"; tail -5 $OUT/3-docs8.txt; echo "at $SECONDS s"
timeout -s KILL $((380 - SECONDS)) python3 tools/dev/fuzz.py sharded --platform gpu \
  --seeds 5689:5800 --time-limit $((350 - SECONDS)) 2>&1 | grep -v "^W0000\|^I0000" \
  > $OUT/3-fuzz-sharded.txt
echo "sharded rc $?"; grep -c "^ok" $OUT/3-fuzz-sharded.txt
grep -v "^ok" $OUT/3-fuzz-sharded.txt | tail -6; echo "done at $SECONDS s"
