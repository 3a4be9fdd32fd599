# Session 61, call 3 (call 1's H200). Call 2's error case still did not raise: the test lowered
# the same function again, and JAX reused its first trace and lowering, so no kernel was asked
# for. The error case is now a test of its own (a function and a kernel, 2 warps, not built
# before). The refit tests again for one clean report; beside them more mosaic fuzz (from 1300).
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
gpu_fuzz $OUT/3-mosaic.txt 330 mosaic --seeds 1300:1700 --jobs 6 --time-limit 290 &
timeout -s INT 320 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu \
  packages/kvax-core/tests/test_attention.py -k "over_shared_memory" \
  -n 5 --kvax-report $OUT/h200-shared-refit.md > $OUT/3-pytest.txt 2>&1
echo "pytest rc $?"; tail -3 $OUT/3-pytest.txt
wait; echo "done at $SECONDS s"
