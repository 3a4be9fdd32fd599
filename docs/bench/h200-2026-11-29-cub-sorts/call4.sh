# Call 4 (session 48, one H200): JAX names no CUDA folder on this machine (jax._src.lib.cuda_path
# is None), so call 3's build made no cubin; make_cubin now runs Triton's bundled ptxas (the one
# its PTX is written for) with jaxlib's command line (cubin.patch, regenerated). The ptxas
# binaries the machine has, the GPU tests of call 3, first calls on the Triton kernels before and
# after, and the kernels' speed with either cubin on 8 documents.
set -x
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
D=docs/bench/h200-2026-11-29-cub-sorts
( which -a ptxas; ls /usr/local/cuda*/bin/ptxas; find / -name ptxas -type f 2>/dev/null | grep -v "^/proc" | head -8 ) 2>/dev/null | sort -u | while read p; do echo "$p: $($p --version | tail -1)"; done > $OUT/4-ptxas.txt
cat $OUT/4-ptxas.txt
timeout 200 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu packages/kvax-core/tests/test_triton_launch.py packages/kvax-core/tests/test_attention.py -n 8 -k "test_triton_launch or (triton and (matches_reference or padding_rows or deterministic))" --kvax-report $OUT/h200-kvax-core-cubin.md > $OUT/4-tests.txt 2>&1
echo "rc $?"; tail -3 $OUT/4-tests.txt
echo "at $SECONDS s"
for v in after before; do
  [ $v = before ] && git apply -R $D/cubin.patch
  timeout 80 python3 tools/first_call.py --doc-median 1100 --backend triton --out /tmp/fc 2>&1 | tail -3 | sed "s/^/$v /"
  [ $v = before ] && git apply $D/cubin.patch
done > $OUT/4-first-calls.txt
cat $OUT/4-first-calls.txt
echo "at $SECONDS s"
timeout 100 python3 tools/dev/cubin_ab.py --num-segments 8 --rounds 3 > $OUT/4-cubin-ab.txt 2>&1
cat $OUT/4-cubin-ab.txt
echo "at $SECONDS s"
