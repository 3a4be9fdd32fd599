source tools/gpu_env.sh
mkdir -p $OUT/gpu
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
D=docs/bench/h100-2026-11-27-bwd-sass
# the Mosaic backward's GPU tests on the changed kernel, first half (every other test id)
mapfile -t ids < $D/3-tests-a.txt
timeout -s INT 560 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu "${ids[@]}" -n 14 -q --kvax-report $OUT/gpu/mosaic-backward-a.md > $OUT/suite.txt 2>&1; echo "suite rc $?"; tail -2 $OUT/suite.txt; grep incomplete $OUT/gpu/*.md; date +%T
