# Call 4 (session 46, one H200): the kernels compiled ahead (prewarm.py, on by default), checked
# and measured. 1) cold first calls, fresh processes in turns: auto with and without it, Triton
# (64k log-normal documents, forward+backward); 2) with JAX's persistent cache (cold, then a warm
# process that loads the step) with and without it; 3) profiles: the masks compiled apart, and a
# forward step; 4) GPU tests: the cold step's kernels compiled ahead, and kernel tests after the
# kernels' rename (kernel_name).
set -x
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
F="python3 tools/first_call.py --doc-median 1100"
for i in 1 2; do
  for c in "auto 1" "auto 0" "triton 1"; do
    set -- $c
    KVAX_PREWARM=$2 timeout -s INT 100 $F --processes 1 --backend $1 --out $OUT/fc-$1-$2-$i > $OUT/4-fc-$1-prewarm$2-$i.txt 2>&1
    echo "rc $? $1 prewarm=$2: $(tail -1 $OUT/4-fc-$1-prewarm$2-$i.txt)"
  done
done
for w in 1 0; do
  KVAX_PREWARM=$w timeout -s INT 150 $F --processes 2 --jax-cache --out $OUT/fcj-$w > $OUT/4-fcj-prewarm$w.txt 2>&1
  echo "rc $? jax cache, prewarm=$w:"; cat $OUT/4-fcj-prewarm$w.txt
done
P="python3 tools/dev/compile_profile.py --doc-median 1100 --min-ms 300"
$P --mask-apart --out $OUT/pm > $OUT/4-prof-mask-apart.txt 2>&1; echo "rc $?"; cat $OUT/4-prof-mask-apart.txt
$P --forward-only --out $OUT/pf > $OUT/4-prof-forward.txt 2>&1; echo "rc $?"; head -30 $OUT/4-prof-forward.txt
echo "at $SECONDS s"
timeout 280 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu packages/kvax-core/tests/test_prewarm.py packages/kvax-core/tests/test_mosaic.py -n 16 -k "cold_steps_kernels or test_matches_reference or deterministic_and_padding_exact or auto_picks" --kvax-report $OUT/h200-kvax-core-prewarm.md > $OUT/4-tests.txt 2>&1
echo "rc $?"; tail -5 $OUT/4-tests.txt
cd $OUT && tar czf call4.tgz fc-* fcj-* pm pf && rm -rf fc-* fcj-* pm pf
echo "at $SECONDS s"
