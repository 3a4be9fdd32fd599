# Session 51, call 1: the test_mosaic GPU tests that session 50's calls 3 and 4 did not run
# (its not-run.txt), and the GPU tests of the launch layer and the builds ahead, which read
# KVAX_PREWARM through triton_launch.ahead_switched_on() since 749a942. One pytest run, the
# report written as each test ends; killed (not interrupted) before the call's limit.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
git log --oneline -1 2>/dev/null || true
timeout -s KILL 540 python3 -c "
import sys, pytest
ids = [line.rstrip('\n') for line in open('docs/bench/h200x2-2026-11-29-checks/not-run.txt')]
ids += ['packages/kvax-core/tests/test_prewarm.py', 'packages/kvax-core/tests/test_triton_launch.py']
sys.exit(pytest.main(['-p', 'kvax_testing.pytest_plugin', '-m', 'gpu', '-n', '14',
                      '--kvax-report', '$OUT/h200-kvax-core-owed.md'] + ids))
" > $OUT/call1.txt 2>&1
echo "rc $?"; grep -m2 "exit status\|totals" $OUT/h200-kvax-core-owed.md; tail -5 $OUT/call1.txt
