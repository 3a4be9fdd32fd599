# Session 61, call 2 (call 1's H200), with the test's error case fixed: call 1 asked for the
# ValueError with another shape, but Triton kernels are built once for any shape, so the kernel
# came from memory, built under the earlier limit. Now the error case asks for a kernel not yet
# built (8 warps). Beside it, more variants fuzz (from seed 8300).
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
gpu_fuzz $OUT/2-variants.txt 330 variants --seeds 8300:8700 --jobs 6 --time-limit 290 &
timeout -s INT 320 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu \
  packages/kvax-core/tests/test_attention.py -k "over_shared_memory" \
  -n 4 --kvax-report $OUT/h200-shared-refit-2.md > $OUT/2-pytest.txt 2>&1
echo "pytest rc $?"; tail -3 $OUT/2-pytest.txt
wait; echo "done at $SECONDS s"
