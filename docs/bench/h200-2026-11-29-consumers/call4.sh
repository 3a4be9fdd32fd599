# Call 4 (session 52, one H200, the session's last 254 s of device time): what soft-capping costs
# FlashAttention-3 itself on the rows where ours costs +14.9% (log-normal) and +10.7% (8
# documents) forward+backward (../h200-2026-11-29-owed call 7): tools/dev/fa3_softcap.py, the
# cap passed to flash-attn3-jax's FFI calls (its wrapper always passes 0), checked first
# against ours capped at 2.
source tools/gpu_env.sh
timeout -s KILL 75 python3 tools/dev/fa3_softcap.py --doc-median 1100 --rounds 6 2>&1 \
  | grep -v "^W0000\|^I0000" | tee $OUT/4-fa3-softcap-lognormal.txt
echo "at $SECONDS s"
timeout -s KILL $((150 - SECONDS)) python3 tools/dev/fa3_softcap.py --doc-median 0 --rounds 6 \
  2>&1 | grep -v "^W0000\|^I0000" | tee $OUT/4-fa3-softcap-docs8.txt
echo "at $SECONDS s"
