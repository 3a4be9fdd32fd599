source tools/gpu_env.sh
mkdir -p $OUT/gpu
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
# the 15 tests call 5's suite did not reach before its time ran out
timeout -s INT 240 python3 -c "
import sys, pytest
ids = ['packages/kvax-core/tests/test_mosaic.py::' + line.strip() for line in open('docs/bench/h100-2026-11-27-layers/call6-rest.txt') if line.strip()]
sys.exit(pytest.main(['-p', 'kvax_testing.pytest_plugin', '-m', 'gpu', '-n', '12', '-q', '--kvax-report', '$OUT/gpu/h100-kvax-core-mosaic-dq-zeroing-rest.md'] + ids))
" > $OUT/suite.txt 2>&1; echo "suite rc $?"; tail -3 $OUT/suite.txt; date +%T
timeout -s INT 150 python3 tools/first_call.py --doc-median 1100 --jax-cache --out $OUT/fc-auto-cache > $OUT/first-call-auto-jax-cache.txt 2>&1; echo "rc $?"; tail -4 $OUT/first-call-auto-jax-cache.txt; date +%T
