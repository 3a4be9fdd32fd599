# Session 63, call 4' (calls 1-3's machine; call4.sh was not run, as calls 1-3 reached all 298
# tests): call 3's one failure, test_builds_over_shared_memory_take_fewer_stages[float32-64]
# ([2, 2] refits of the backward where one was expected), run 6 times at once by diag_refit.py
# with every backward build it asks printed; fuzz beside it for the rest of the call.
D=docs/bench/h200x2-2026-11-30-suite-s63
source tools/gpu_env.sh
for i in 1 2 3 4 5 6; do
  timeout -s INT 250 python3 $D/diag_refit.py 2>&1 | grep "^ASK\|^PASS\|^FAIL\|Error" \
    > $OUT/5-diag-$i.txt &
done
gpu_fuzz $OUT/5-variants.txt 250 variants --seeds 11300:12300 --jobs 8 --time-limit 200 &
gpu_fuzz $OUT/5-sharded_mosaic.txt 250 sharded_mosaic --platform gpu --seeds 33:200 \
  --time-limit 200 &
wait; cat $OUT/5-diag-*.txt; echo "done at $SECONDS s"
