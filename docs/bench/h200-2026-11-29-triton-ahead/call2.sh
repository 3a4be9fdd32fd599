# Call 2 (session 49, one H200): call 1's builds ahead started each kernel's build as its launch
# was traced, the backward's only at the end of the step's trace; now the forward, traced under
# differentiation, also has the backward lowered ahead in a thread (vjp.py, Triton backend), so
# that the backward kernel (the longer build) starts with the forward's. The launch layer's GPU
# tests again, then cold and warm first calls with and without, in turns (4 rounds).
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 150 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu packages/kvax-core/tests/test_triton_launch.py -n 4 --kvax-report $OUT/h200-kvax-core-triton-ahead-bwd.md > $OUT/2-tests.txt 2>&1
echo "rc $?"; tail -4 $OUT/2-tests.txt
echo "at $SECONDS s"
for round in 1 2 3 4; do
  for ahead in $( [ $((round % 2)) = 1 ] && echo "1 0" || echo "0 1" ); do
    KVAX_PREWARM=$ahead timeout 90 python3 tools/first_call.py --doc-median 1100 --backend triton --processes 2 --out /tmp/fc 2>&1 | tail -2 | sed "s/^/ahead=$ahead /"
  done
done > $OUT/2-first-calls.txt
cat $OUT/2-first-calls.txt
echo "at $SECONDS s"
