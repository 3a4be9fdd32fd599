# Call 2 (session 48, one H200): the Triton kernels launched with the cubin kvax's build makes
# (triton_launch: Triton's ptxas step, carried as jaxlib's module image; cubin.patch). GPU
# tests (the launch layer's four, among them one where jaxlib's ptxas is made to fail, and ten
# Triton kernel tests), the kernels' speed with either ptxas's cubin (tools/dev/cubin_ab.py,
# processes in turns), then first calls on the Triton kernels before (cubin.patch reversed)
# and after.
set -x
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
D=docs/bench/h200-2026-11-29-cub-sorts
timeout 240 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu packages/kvax-core/tests/test_triton_launch.py packages/kvax-core/tests/test_attention.py -n 8 -k "test_triton_launch or (triton and (matches_reference or padding_rows or deterministic))" --kvax-report $OUT/h200-kvax-core-cubin.md > $OUT/2-tests.txt 2>&1
echo "rc $?"; tail -3 $OUT/2-tests.txt
echo "at $SECONDS s"
timeout 150 python3 tools/dev/cubin_ab.py --doc-median 1100 --rounds 3 > $OUT/2-cubin-ab.txt 2>&1
timeout 120 python3 tools/dev/cubin_ab.py --num-segments 8 --rounds 2 >> $OUT/2-cubin-ab.txt 2>&1
cat $OUT/2-cubin-ab.txt
echo "at $SECONDS s"
for v in after before; do
  [ $v = before ] && git apply -R $D/cubin.patch
  timeout 150 python3 tools/first_call.py --doc-median 1100 --backend triton --out /tmp/fc 2>&1 | tail -3 | sed "s/^/$v /"
  [ $v = before ] && git apply $D/cubin.patch
done > $OUT/2-first-calls.txt
cat $OUT/2-first-calls.txt
echo "at $SECONDS s"
