# Session 57, call 2 (two H200s, warm after call 1), code at a4246ed: the cap's cost on the new
# default against the row maxima (--maxima) in one process, log-normal documents (10 rounds) and
# 8 documents (6 rounds), 64k, 8 chained calls; then `sharded` fuzz from seed 5689 on both GPUs.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
timeout -s INT 200 python3 tools/dev/spike_softcap.py --doc-median 1100 --layers 8 --maxima \
  --rounds 10 --repeats 1 > $OUT/2-lognormal.txt 2>&1
echo "rc $?"; tail -5 $OUT/2-lognormal.txt; date +%T
timeout -s INT 160 python3 tools/dev/spike_softcap.py --layers 8 --maxima --rounds 6 \
  --repeats 1 > $OUT/2-docs8.txt 2>&1
echo "rc $?"; tail -5 $OUT/2-docs8.txt; date +%T
timeout -s KILL $((540 - SECONDS)) python3 tools/dev/fuzz.py sharded --platform gpu \
  --seeds 5689:5800 --time-limit $((500 - SECONDS)) 2>&1 | grep -v "^W0000\|^I0000" \
  > $OUT/2-fuzz-sharded.txt
echo "sharded rc $?"; grep -c "^ok" $OUT/2-fuzz-sharded.txt
grep -v "^ok" $OUT/2-fuzz-sharded.txt | tail -8; echo "done at $SECONDS s"
