# Session 64, call 3 (one H200): call 2's spike was too noisy to read (one kernel 1.36-1.79 ms
# across rounds), so again with --layers 8 (8 calls chained per timing, as bench.py's tables)
# and 16 rounds: short documents (the idle steps), log-normal and 8 documents (none: controls).
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
timeout -s INT 540 python3 tools/dev/spike_mosaic.py --rows 2,1,0 --skip-check --layers 8 \
  --configs 64x128x2p,64x128x2pc --rounds 16 --repeats 10 --fa3 2>&1 \
  | grep -v "^[WI]0000 " > $OUT/2-spike.txt
echo "spike rc ${PIPESTATUS[0]}"; grep "median\|first\|FAIL" $OUT/2-spike.txt; echo "done at $SECONDS s"
