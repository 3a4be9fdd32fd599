source tools/gpu_env.sh
mkdir -p $OUT/gpu
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
# a bound on what staggering the backward's consumers could gain: consumer 1 starts after
# consumer 0's first dS^T and dQ does not wait for the other's dS^T (its dQ is wrong)
timeout -s INT 150 python3 tools/dev/spike_det_bwd.py --configs "mosaic det" --variant stagger:stagger=1 --layouts lognormal,docs8 --rounds 3 --cap 30 > $OUT/spike-cap.txt 2>&1; echo "rc $?"; tail -6 $OUT/spike-cap.txt; date +%T
timeout -s INT 150 python3 tools/dev/spike_det_bwd.py --configs "mosaic det" --variant stagger:stagger=1 --layouts lognormal,docs8 --rounds 3 > $OUT/spike-nocap.txt 2>&1; echo "rc $?"; tail -6 $OUT/spike-nocap.txt; date +%T
# the Mosaic backward's GPU tests (the default, stagger=0), not all run since head_steps moved
timeout -s INT 250 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu packages/kvax-core/tests/test_mosaic.py -k "mosaic_backward or further_layer" -n 14 -q --kvax-report $OUT/gpu/h100-kvax-core-mosaic-backward.md > $OUT/suite.txt 2>&1; echo "suite rc $?"; tail -3 $OUT/suite.txt; date +%T
