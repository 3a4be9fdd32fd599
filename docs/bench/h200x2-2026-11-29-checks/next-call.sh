# Prepared for the next session (not run): the GPU tests of test_mosaic that calls 3 and 4 may
# not have run (positions 121-210 of the 210 in collection order, less the 33 call 4 named:
# not-run.txt), with the report written as each test ends. About 5 minutes on one H200.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
timeout -s KILL 560 python3 -c "
import sys, pytest
ids = [line.rstrip('\n') for line in open('docs/bench/h200x2-2026-11-29-checks/not-run.txt')]
sys.exit(pytest.main(['-p', 'kvax_testing.pytest_plugin', '-m', 'gpu', '-n', '14',
                      '--kvax-report', '$OUT/h200-kvax-core-mosaic-middle.md'] + ids))
" > $OUT/next-mosaic.txt 2>&1
echo "rc $?"; grep -m2 "exit status\|totals" $OUT/h200-kvax-core-mosaic-middle.md
