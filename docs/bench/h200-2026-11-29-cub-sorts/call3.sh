# Call 3 (session 48, one H200): call 2's cubins came from Triton's bundled ptxas (CUDA 12.8),
# not the one jaxlib runs; now make_cubin runs JAX's CUDA folder's ptxas with jaxlib's command
# line (cubin.patch again, regenerated). A probe of who runs ptxas and how (ptxas_probe.py), the
# GPU tests of call 2 (the ptxas test's child now in a file), the kernels' speed with either
# cubin, and first calls on the Triton kernels before and after.
set -x
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
D=docs/bench/h200-2026-11-29-cub-sorts
timeout 120 python3 $D/ptxas_probe.py > $OUT/3-ptxas-probe.txt 2>&1
cat $OUT/3-ptxas-probe.txt
echo "at $SECONDS s"
timeout 240 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu packages/kvax-core/tests/test_triton_launch.py packages/kvax-core/tests/test_attention.py -n 8 -k "test_triton_launch or (triton and (matches_reference or padding_rows or deterministic))" --kvax-report $OUT/h200-kvax-core-cubin.md > $OUT/3-tests.txt 2>&1
echo "rc $?"; tail -3 $OUT/3-tests.txt
echo "at $SECONDS s"
timeout 130 python3 tools/dev/cubin_ab.py --doc-median 1100 --rounds 3 > $OUT/3-cubin-ab.txt 2>&1
timeout 150 python3 tools/dev/cubin_ab.py --num-segments 8 --rounds 3 >> $OUT/3-cubin-ab.txt 2>&1
cat $OUT/3-cubin-ab.txt
echo "at $SECONDS s"
for v in after before; do
  [ $v = before ] && git apply -R $D/cubin.patch
  timeout 100 python3 tools/first_call.py --doc-median 1100 --backend triton --out /tmp/fc 2>&1 | tail -3 | sed "s/^/$v /"
  [ $v = before ] && git apply $D/cubin.patch
done > $OUT/3-first-calls.txt
cat $OUT/3-first-calls.txt
echo "at $SECONDS s"
