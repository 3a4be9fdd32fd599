# Call 5 (session 48, one H200): call 4's failing test put JAX_TRITON_PTXAS_EXTRA_FLAGS in the
# environment of the whole second process, and kvax's cache key holds that variable (a cubin
# depends on the user's ptxas flags), so that process missed the disk and built again with the
# bad flag. Its child now sets the flag after the step is compiled, when only jaxlib reads it.
source tools/gpu_env.sh
timeout 100 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu packages/kvax-core/tests/test_triton_launch.py -k without_jaxlibs_ptxas --kvax-report $OUT/h200-kvax-core-cubin-ptxas.md > $OUT/5-tests.txt 2>&1
echo "rc $?"; tail -3 $OUT/5-tests.txt
