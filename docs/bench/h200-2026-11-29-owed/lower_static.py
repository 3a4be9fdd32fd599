"""The Mosaic backward lowered for CUDA on CPU with each trial config (session 51): seconds and
module size per config, from the repository root: python docs/bench/h200-2026-11-29-owed/lower_static.py
(KVAX_CACHE_DIR=off: every lowering from scratch)."""
import sys, time
sys.path.insert(0, "tools"); sys.path.insert(0, "tools/dev")
import jax
from kvax._src.attention.mosaic_bwd import BackwardConfig
from kvax.utils import FlashAttentionParamsConfig
from workloads import Workload
import spike_mosaic_bwd as smb
bwd = FlashAttentionParamsConfig(query_block_size=64, kv_block_size=128, num_warps=8, num_stages=3)
for w in (Workload(1000, 5, 77, num_heads=4, num_kv_heads=2),
          Workload(513, 1, 0, head_dim=64, num_heads=2, num_kv_heads=2, causal=False)):
    p = smb._problem(w, backward_params=bwd, lower_only=True)
    for name, cfg in (("default", BackwardConfig()), ("slots", BackwardConfig(static_slots=True)),
                      ("consumers", BackwardConfig(static_consumers=True)),
                      ("both", BackwardConfig(static_slots=True, static_consumers=True))):
        jax.clear_caches()
        args, fns = smb._runners(p, bwd, {name: cfg})
        t = time.perf_counter()
        text = fns[name].trace(*args).lower(lowering_platforms=("cuda",)).as_text()
        print(w.name, name, f"{time.perf_counter() - t:.2f} s", len(text), text.count("custom_call @mosaic_gpu"), flush=True)
