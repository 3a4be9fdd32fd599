# Session 60, call 3 (one H200, call 2's machine), at 6bf605a: call 2's pytest report and logs
# did not come back (at most 8 files return from $OUT; the 8 single-seed runs took them all; their
# summaries are in call 2's output, README.md). The GPU tests again, for the report, beside more
# mosaic seeds (from 600); the fuzz log in one file.
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
gpu_fuzz $OUT/3-mosaic.txt 440 mosaic --seeds 600:900 --jobs 8 --time-limit 390 &
timeout -s INT 280 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu \
  packages/kvax-core/tests/test_attention.py -k "large_blocks or head_dims_with_device_defaults" \
  -n 6 --kvax-report $OUT/h200-large-blocks.md > $OUT/3-pytest.txt 2>&1
echo "pytest rc $?"; tail -3 $OUT/3-pytest.txt
wait; echo "done at $SECONDS s"
