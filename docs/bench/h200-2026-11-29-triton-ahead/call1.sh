# Call 1 (session 49, one H200): the GPU checks owed since session 48 (its last launcher edits
# and the Triton kernels at HEAD) with the Triton kernels built ahead (build_ahead, new), then
# cold and warm first calls of the Triton step with and without the builds ahead, in turns.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 260 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu packages/kvax-core/tests/test_triton_launch.py packages/kvax-core/tests/test_attention.py -n 8 -k "test_triton_launch or (triton and (matches_reference or padding_rows or deterministic))" --kvax-report $OUT/h200-kvax-core-triton-ahead.md > $OUT/1-tests.txt 2>&1
echo "rc $?"; tail -4 $OUT/1-tests.txt
echo "at $SECONDS s"
for round in 1 2 3; do
  for ahead in $( [ $((round % 2)) = 1 ] && echo "1 0" || echo "0 1" ); do
    KVAX_PREWARM=$ahead timeout 90 python3 tools/first_call.py --doc-median 1100 --backend triton --processes 2 --out /tmp/fc 2>&1 | tail -2 | sed "s/^/ahead=$ahead /"
  done
done > $OUT/1-first-calls.txt
cat $OUT/1-first-calls.txt
echo "at $SECONDS s"
