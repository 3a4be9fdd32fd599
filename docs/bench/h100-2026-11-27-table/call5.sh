source tools/gpu_env.sh
mkdir -p $OUT/gpu
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
# test_mosaic.py's GPU tests that had not run since the forward reads its layouts from the mask
# (the ones session 30's reports do not list; call5-tests.txt)
timeout -s INT 540 python3 -c "
import sys, pytest
ids = ['packages/kvax-core/tests/test_mosaic.py::' + line.strip() for line in open('docs/bench/h100-2026-11-27-table/call5-tests.txt') if line.strip()]
sys.exit(pytest.main(['-p', 'kvax_testing.pytest_plugin', '-m', 'gpu', '-n', '14', '-q', '--kvax-report', '$OUT/gpu/h100-kvax-core-mosaic-after-mask-layouts.md'] + ids))
" > $OUT/suite.txt 2>&1; echo "suite rc $?"; tail -3 $OUT/suite.txt; date +%T
