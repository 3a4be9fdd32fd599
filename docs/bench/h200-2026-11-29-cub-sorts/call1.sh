# Call 1 (session 48, one H200): the masks' sorts as CUB takes them (lexsort.row_order, cub.patch).
# The GPU tests owed since session 47's last call (the Mosaic cache and kernel tests) at this
# code, the sort tests on the GPU (rows of 30011 go to CUB), the masks' compile before / after
# (cub.patch reversed for "before"; alternating, fresh processes, XLA's longest LLVM modules),
# then first calls (cold / warm / warm again, Mosaic and Triton kernels) and a warm step's
# compile by phase.
set -x
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
D=docs/bench/h200-2026-11-29-cub-sorts
timeout 200 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu packages/kvax-core/tests/test_mosaic_cache.py packages/kvax-core/tests/test_mosaic.py -n 16 -k "second_process or test_matches_reference or deterministic_and_padding_exact or auto_picks" --kvax-report $OUT/h200-kvax-core-cub-sorts.md > $OUT/1-tests.txt 2>&1
echo "rc $?"; tail -3 $OUT/1-tests.txt
timeout 120 python3 -m pytest -q packages/kvax-core/tests/test_mask.py packages/kvax-core/tests/test_mosaic.py -n 8 -k "row_order or cub or relabel or against_brute_force or rank_intervals" > $OUT/1-sort-tests.txt 2>&1
echo "rc $?"; tail -3 $OUT/1-sort-tests.txt
echo "at $SECONDS s"
for i in 1 2; do
  for v in before after; do
    [ $v = before ] && git apply -R $D/cub.patch
    for part in relabel layouts masks; do
      timeout 60 python3 tools/dev/mask_compile.py --part $part --profile 2>&1 | sed "s/^/$v /"
    done
    [ $v = before ] && git apply $D/cub.patch
  done
done > $OUT/1-mask-compile.txt 2>&1
grep -v "LLVM module" $OUT/1-mask-compile.txt
echo "at $SECONDS s"
for b in auto triton; do
  timeout 150 python3 tools/first_call.py --doc-median 1100 --backend $b --out /tmp/fc 2>&1 | tail -3
done > $OUT/1-first-calls.txt
cat $OUT/1-first-calls.txt
echo "at $SECONDS s"
timeout 120 python3 tools/dev/compile_profile.py --doc-median 1100 --warm --backend auto --min-ms 40 --out /tmp/cp > $OUT/1-warm-profile.txt 2>&1
head -40 $OUT/1-warm-profile.txt
echo "at $SECONDS s"
