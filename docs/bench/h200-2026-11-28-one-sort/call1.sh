# Call 1 (session 42, one H200): the rank intervals built by one sort of the keys with two probes
# a query (70cf777), which had run only on CPU. What the layouts cost to build on the measured
# rows (session 41's call 1 timed the first version, two binary searches a query: 0.31-0.34 ms),
# then session 41's call 3 selection of the forward's GPU tests on HEAD.
set -x
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
timeout -s KILL 100 python3 - <<'PY' 2>&1 | grep -v "^W0000\|^I0000" | tee $OUT/1-layouts.txt
# the kernel layouts of each rule on the measured rows, jitted: ms a build (median of 20)
import sys
sys.path[:0] = ["tools", "tools/dev"]
import jax, jax.numpy as jnp
from measure import median_ms
from workloads import inputs
import spike_mosaic
from kvax._src.attention import mosaic_fwd
from kvax._src.attention.variant import MaskVariant
for row in (2, 1, 0, 3):
    w = spike_mosaic.ROWS[row]
    _, _, _, pos, seg = inputs(w)
    pos, seg = jnp.asarray(pos), jnp.asarray(seg)
    for rank in (False, True):
        cfg = mosaic_fwd.MosaicConfig(persistent=True, rank_rule=rank)
        fn = jax.jit(lambda p, s, cfg=cfg: mosaic_fwd.kernel_layouts(
            p, s, p, s, pad_id=-1, config=cfg, variant=MaskVariant(w.causal)))
        ms = median_ms(lambda: fn(pos, seg), 20)
        print(f"{w.name:<62} rank_rule={rank!s:<5} layouts {ms:.3f} ms", flush=True)
PY
echo "at $SECONDS s"
timeout -s KILL $((590 - SECONDS)) python3 -m pytest \
  -p kvax_testing.pytest_plugin -m gpu packages/kvax-core/tests/test_mosaic.py -n 16 \
  -k "test_matches_reference or test_variants_match_reference or either_rule \
or document_chunks_bitwise or schedule_from_the_mask or deterministic_and_padding_exact \
or auto_picks or (document_chunks_match_reference and default)" \
  --kvax-report $OUT/h200-kvax-core-one-sort.md 2>&1 | grep -v Warning | tail -8
echo "done at $SECONDS s"
