# Prepared for the next session (not run): the changes after this session's GPU calls on a GPU.
# dd9caca (the custom_vjp called as it is under a trace: one trace of each kernel a step) and
# 80e1bf0 (the launch layer's wait limit): the public API's GPU tests (both backends) and the
# launch layer's, then warm and cold first calls of the default (Mosaic) step before and after
# dd9caca in turns (one-trace.patch reversed gives the wiring before it).
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
D=docs/bench/h200-2026-11-29-triton-ahead
timeout 330 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu packages/kvax-core/tests/test_attention.py packages/kvax-core/tests/test_nn.py packages/kvax-core/tests/test_triton_launch.py -n 14 --kvax-report $OUT/gpu-after-one-trace.md > $OUT/next-tests.txt 2>&1
echo "rc $?"; tail -3 $OUT/next-tests.txt
echo "at $SECONDS s"
for round in 1 2 3; do
  for v in $( [ $((round % 2)) = 1 ] && echo "after before" || echo "before after" ); do
    [ $v = before ] && git apply -R $D/one-trace.patch
    timeout 60 python3 tools/first_call.py --doc-median 1100 --processes 2 --out /tmp/fc 2>&1 | tail -2 | sed "s/^/$v /"
    [ $v = before ] && git apply $D/one-trace.patch
  done
done > $OUT/next-first-calls.txt
cat $OUT/next-first-calls.txt
echo "at $SECONDS s"
