source tools/gpu_env.sh
mkdir -p $OUT/gpu
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
D=docs/bench/h100-2026-11-27-bwd-sass
# the Mosaic backward's GPU tests on the changed kernel, second half
mapfile -t ids < $D/4-tests-b.txt
timeout -s INT 330 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu "${ids[@]}" -n 14 -q --kvax-report $OUT/gpu/mosaic-backward-b.md > $OUT/suite.txt 2>&1; echo "suite rc $?"; tail -2 $OUT/suite.txt; grep incomplete $OUT/gpu/*.md; date +%T
# before and after on the other two rows
timeout -s INT 240 python3 tools/dev/spike_det_bwd.py --layouts docs8,short --configs "mosaic det,mosaic nondet" --before $D/before_mosaic_bwd.py --rounds 3 > $OUT/spike.txt 2>&1; echo "rc $?"; grep -v "^round" $OUT/spike.txt | tail -6; date +%T
