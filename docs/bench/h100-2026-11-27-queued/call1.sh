source tools/gpu_env.sh
mkdir -p $OUT/gpu
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv; date +%T
# the public call with its masks as arguments (api), closed over them (apic), FA3 handed the same
# arguments unused (fa3a); single calls, bursts waited call by call, and queued bursts
timeout -s INT 200 python3 tools/dev/per_call.py --out $OUT/pc --rows 1,0 --public --turns 20 --bursts 6 > $OUT/percall.txt 2>&1; echo "rc $?"; grep -v "clock samples" $OUT/percall.txt | tail -40; date +%T
# the GPU tests on the device defaults (auto: the Hopper forward with the mask's layouts) not rerun since
timeout -s INT 200 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu packages/kvax-core/tests/test_attention.py packages/kvax-core/tests/test_nn.py -k "head_dims_with_device_defaults or flax_nnx" -n 8 -q --kvax-report $OUT/gpu/h100-kvax-core-device-defaults.md > $OUT/suite.txt 2>&1; echo "suite rc $?"; tail -3 $OUT/suite.txt; date +%T
