# Session 57, call 2 (two H200s, a fresh machine), code at a4246ed: the 12 capped tests call 1
# did not reach (tests-left.txt, found from its report; the head-dim-256 and sinks cases, the
# longest), then the cap's cost on the new default against the row maxima (--maxima) in one
# process, log-normal documents, 64k, 8 chained calls, as far as the time goes.
D=docs/bench/h200x2-2026-11-30-fixed-default
source tools/gpu_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader; date +%T
mapfile -t TESTS < $D/tests-left.txt
timeout -s INT 380 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu "${TESTS[@]}" -n 12 \
  --kvax-report $OUT/h200x2-kvax-core-capped-fixed-default-rest.md > $OUT/2-tests.txt 2>&1
echo "tests rc $?"; tail -3 $OUT/2-tests.txt; echo "at $SECONDS s"
timeout -s INT $((550 - SECONDS)) python3 tools/dev/spike_softcap.py --doc-median 1100 \
  --layers 8 --maxima --rounds 6 --repeats 1 > $OUT/2-lognormal.txt 2>&1
echo "rc $?"; tail -5 $OUT/2-lognormal.txt; echo "done at $SECONDS s"
