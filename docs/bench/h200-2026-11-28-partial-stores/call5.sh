# Call 5 (session 40, one H200): the forward's partial stores (a chunk's first and last rows) as
# one TMA copy per binary digit of the row count (mosaic_fwd.store_rows: 6 copies a consumer,
# not 22), then again the document chunks on rows of short documents (short_chunks, "c"),
# whose partial stores had eaten their gain. The spike's check (short-document rows that take
# the chunks added; packed heads "/4" for the smaller tiles' copies), the GPU tests of the
# chunks, then single calls in turn on short and log-normal documents.
set -x
source tools/gpu_env.sh
timeout -s KILL 160 python3 tools/dev/spike_mosaic.py --configs 64x128x2p,64x128x2pc,64x128x2/4 \
  --rows 2 --rounds 4 --repeats 10 --fa3 2>&1 | grep -v "^W0000\|^I0000" | tee $OUT/5-spike.txt
echo "at $SECONDS s"
timeout -s KILL 130 python3 -m pytest -p kvax_testing.pytest_plugin -m gpu \
  packages/kvax-core/tests/test_mosaic.py -n 14 -k document_chunks \
  --kvax-report $OUT/h200-kvax-core-mosaic-partial-stores.md 2>&1 | tail -3
echo "at $SECONDS s"
timeout -s KILL $((372 - SECONDS)) python3 tools/dev/per_call.py --out /tmp/pc --rows 2,1 \
  --configs 64x128x2p,64x128x2pc --turns 40 --bursts 10 2>&1 \
  | grep -v "^W0000\|^I0000\|clock samples" | tee $OUT/5-percall.txt
