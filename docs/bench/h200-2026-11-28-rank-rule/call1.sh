# Call 1 (session 41, one H200): masked tiles tested on key ranks against each query's interval
# of visible ranks (MosaicConfig.rank_rule, "r": one value a key instead of its position and id,
# two compares an element), against the default rule, beside FA3. The small check first, then
# the short (2), log-normal (1), 8-document (0) and causal (4) rows in the spike's rounds, then
# single calls in turn on the short and log-normal rows, then what the layouts cost to build.
set -x
source tools/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
timeout -s KILL 300 python3 tools/dev/spike_mosaic.py --configs 64x128x2p,64x128x2pr \
  --rows 2,1,0,4 --rounds 4 --repeats 10 --fa3 2>&1 | grep -v "^W0000\|^I0000" \
  | tee $OUT/1-spike.txt
echo "at $SECONDS s"
timeout -s KILL $((470 - SECONDS)) python3 tools/dev/per_call.py --out /tmp/pc --rows 2,1 \
  --configs 64x128x2p,64x128x2pr --turns 40 --bursts 10 2>&1 \
  | grep -v "^W0000\|^I0000\|clock samples" | tee $OUT/1-percall.txt
echo "at $SECONDS s"
timeout -s KILL $((570 - SECONDS)) python3 - <<'PY' 2>&1 | grep -v "^W0000\|^I0000" \
  | tee $OUT/1-layouts.txt
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
