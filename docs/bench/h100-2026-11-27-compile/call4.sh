source tools/gpu_env.sh
mkdir -p $OUT/gpu
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
# cold first calls of the final code (the forward's steps once each, the backward's three loops)
# against the Triton kernels, one fresh process each
F="python3 tools/first_call.py --doc-median 1100 --processes 1"
for c in "auto --forward-only" "auto" "triton"; do
  timeout -s INT 100 $F --backend $c --out $OUT/fc > $OUT/fc.txt 2>&1; echo "rc $? $c: $(tail -1 $OUT/fc.txt)"
done; date +%T
# the forward's GPU tests through the new loops: default, overlapped, packed heads, variants,
# bitwise reruns and padding
K="overlapped or test_matches_reference or deterministic_and_padding_exact or split_keys_bitwise or forward_schedule or packed_heads_forward or variants_match_reference"
timeout -s INT 470 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu packages/kvax-core/tests/test_mosaic.py -k "$K" -n 14 -q --kvax-report $OUT/gpu/h100-kvax-core-mosaic-forward-loops.md > $OUT/suite.txt 2>&1; echo "suite rc $?"; tail -3 $OUT/suite.txt; date +%T
