# Call 6 (session 47, one H200): the two GPU tests of mosaic_cache.py and prewarm.py at the final
# code (after call 5, mosaic_cache's hooks fall back to Mosaic GPU's own naming and lowering if
# they ever raise; the paths that ran in call 5 are unchanged).
set -x
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 150 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu packages/kvax-core/tests/test_mosaic_cache.py packages/kvax-core/tests/test_prewarm.py -n 2 --kvax-report $OUT/h200-kvax-core-mosaic-cache-final.md > $OUT/6-tests.txt 2>&1
echo "rc $?"; tail -3 $OUT/6-tests.txt
echo "at $SECONDS s"
