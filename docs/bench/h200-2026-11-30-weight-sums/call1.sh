# Session 54, call 1 (one H200): what the soft-capped forward's fix for rows that see few keys
# costs. With the fixed reference (blockwise.capped_reference) no weight is exactly 1, so the
# output, sum(bf16(p) v) / sum(p), is off by up to 2^-9 of v even where a row sees one key
# (fuzz seed 5812, ../h200x2-2026-11-29-fuzz-b/). Trial switch mosaic_fwd.WEIGHT_SUMS: "float"
# (as before), "both" (the output divided by the sum of the rounded weights, the logsumexp from
# the float32 sum), "rounded" (both from the rounded weights); "+max" is running maxima (no fixed
# reference). Log-normal documents, 64k, 8 chained calls, as session 52's call 7; then 8 documents.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader; date +%T
timeout -s INT 330 python3 tools/dev/spike_softcap.py --doc-median 1100 --layers 8 \
  --weight-sums float,rounded --rounds 10 --repeats 1 > $OUT/1-lognormal.txt 2>&1
echo "rc $?"; tail -7 $OUT/1-lognormal.txt; date +%T
timeout -s INT $((560 - SECONDS)) python3 tools/dev/spike_softcap.py --layers 8 \
  --weight-sums float,rounded --rounds 6 --repeats 1 > $OUT/1-docs8.txt 2>&1
echo "rc $?"; tail -7 $OUT/1-docs8.txt; date +%T
