# Call 3 (session 46, one H200): what the rest of the Mosaic step's XLA compile is, with the
# kernels compiled ahead: two profiled cold processes (every range over 1 ms kept in the JSON,
# with its start), the second with XLA's optimized HLO dumped to name the modules it compiles.
set -x
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader
P="python3 tools/dev/compile_profile.py --doc-median 1100 --min-ms 200"
$P --backend auto --out $OUT/p1 > $OUT/3-prof-1.txt 2>&1; echo "rc $?"; cat $OUT/3-prof-1.txt
XLA_FLAGS="--xla_dump_to=$OUT/hlo --xla_dump_hlo_as_text --xla_dump_hlo_pass_re=^$" \
  $P --backend auto --out $OUT/p2 > $OUT/3-prof-2.txt 2>&1; echo "rc $?"; head -3 $OUT/3-prof-2.txt
ls $OUT/hlo | head; ls $OUT/hlo | wc -l
cd $OUT && mkdir keep && cp hlo/*jit_step*after_optimizations.txt keep/ 2>/dev/null
tar czf call3.tgz p1 p2 keep 3-prof-*.txt && rm -rf hlo p1 p2 keep && ls -la
echo "at $SECONDS s"
