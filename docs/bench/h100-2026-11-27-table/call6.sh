source tools/gpu_env.sh
mkdir -p $OUT/gpu
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
# test_attention.py's GPU tests (the Triton kernels, and "auto" on Hopper) with masks that now
# carry the Hopper forward's layouts, and the one Mosaic test call 5 did not finish
timeout -s INT 430 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu packages/kvax-core/tests/test_attention.py "packages/kvax-core/tests/test_mosaic.py::test_variants_match_reference[S777-T300-N6K2-H64-float16-sinks=True-logits_soft_cap=4.0-local_window_size=(40, 0)]" -n 14 -q --kvax-report $OUT/gpu/h100-kvax-core-attention-after-mask-layouts.md > $OUT/suite.txt 2>&1; echo "suite rc $?"; tail -3 $OUT/suite.txt; date +%T
# random cases through the kernels (seeds not run before on a GPU)
timeout -s INT 120 python3 tools/dev/fuzz.py variants --platform gpu --seeds 100:140 --jobs 6 > $OUT/fuzz-variants.txt 2>&1; echo "fuzz rc $?"; tail -4 $OUT/fuzz-variants.txt; date +%T
