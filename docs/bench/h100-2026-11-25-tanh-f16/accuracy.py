"""Soft cap accuracy, tanh in float32 vs float16: error / baseline of each compared tensor."""
import sys
import jax, jax.numpy as jnp, numpy as np
sys.path.insert(0, "packages/kvax-core/tests")
from kvax._src.attention import mosaic_fwd
import test_mosaic as tm

rows = []
for ci in (0, 1, 3, 5):
    for cap, sign in ((5.0, 1.0), (30.0, 1.0), (30.0, 40.0), (50.0, -40.0), (70.0, 40.0)):
        seed = 1000 + ci * 10 + int(cap)
        for name, dt in (("f32", jnp.float32), ("f16", jnp.float16)):
            mosaic_fwd.CAP_TANH_DTYPE = dt
            jax.clear_caches()
            rep = tm._check(tm.CASES[ci], dict(logits_soft_cap=cap), seed, scale_sign=sign)
            ratios = {c.name: c.error / max(c.baseline, 1e-30) for c in rep.comparisons}
            print(f"case {ci} cap {cap:g} sign {sign:g} {name}: ok={rep.ok} "
                  + " ".join(f"{k}={v:.3f}" for k, v in ratios.items()), flush=True)
            if not rep.ok:
                print(rep, flush=True)
