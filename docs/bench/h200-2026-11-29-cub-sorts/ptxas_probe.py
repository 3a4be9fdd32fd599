"""Which ptxas, with which flags, compiles a Triton kernel's PTX (session 48, call 3): a copy of
JAX's CUDA folder whose bin/ptxas logs each command line and runs the real one, given to fresh
processes as CUDA_ROOT (JAX's cuda_path reads it first); the processes run a Triton forward and
backward with jaxlib compiling the PTX ("jaxlib": no cubin from kvax's build) and with kvax's
cubins ("kvax"), each with the kvax cache off, and the log shows who ran ptxas, and how.
(It stopped at its first line on the H200 machine: JAX names no CUDA folder there,
jax._src.lib.cuda_path is None; 3-ptxas-probe.txt.)

    python docs/bench/h200-2026-11-29-cub-sorts/ptxas_probe.py
"""

import os
import subprocess
import sys
import tempfile

CHILD = """
import sys, jax, jax.numpy as jnp
from jax._src import lib
from kvax._src.attention import triton_launch
print("cuda_path", lib.cuda_path, "ptxas_path", triton_launch.ptxas_path(), flush=True)
if sys.argv[1] == "jaxlib":
    triton_launch.make_cubin = lambda *args: None
from kvax.ops import flash_attention
from kvax_testing import packed_batch
b = packed_batch(5, batch=1, kv_len=333, num_heads=4, num_kv_heads=2, head_dim=64,
                 dtype="bfloat16", num_docs=3, pad_tokens=13)
lay = [jnp.asarray(a) for a in b.layout.arrays]
f = lambda q, k, v: flash_attention(q, k, v, *lay, scale=0.125, backend="triton")
out, vjp = jax.vjp(f, *(jnp.asarray(x) for x in (b.query, b.key, b.value)))
jax.block_until_ready(vjp(out))
print("ran", flush=True)
"""


def main():
    from jax._src import lib

    real = lib.cuda_path
    print("JAX's cuda_path:", real)
    print(subprocess.run([os.path.join(real, "bin", "ptxas"), "--version"], capture_output=True,
                         text=True).stdout.strip().splitlines()[-1])
    folder = tempfile.mkdtemp(prefix="kvax-ptxas-probe-")
    for name in os.listdir(real):
        if name != "bin":
            os.symlink(os.path.join(real, name), os.path.join(folder, name))
    os.makedirs(os.path.join(folder, "bin"))
    for name in os.listdir(os.path.join(real, "bin")):
        if name != "ptxas":
            os.symlink(os.path.join(real, "bin", name), os.path.join(folder, "bin", name))
    log = os.path.join(folder, "ptxas.log")
    wrapper = os.path.join(folder, "bin", "ptxas")
    with open(wrapper, "w") as f:
        f.write(f'#!/bin/sh\necho "$PROBE_MODE: $*" >> {log}\n'
                f'exec {os.path.join(real, "bin", "ptxas")} "$@"\n')
    os.chmod(wrapper, 0o755)
    for mode in ("jaxlib", "kvax"):
        env = dict(os.environ, CUDA_ROOT=folder, KVAX_CACHE_DIR="off", PROBE_MODE=mode)
        done = subprocess.run([sys.executable, "-c", CHILD, mode], env=env, capture_output=True,
                              text=True)
        print(mode, "rc", done.returncode, *done.stdout.splitlines()[-2:], done.stderr[-800:]
              if done.returncode else "")
    lines = open(log).read().splitlines() if os.path.exists(log) else []
    print(f"{len(lines)} ptxas command lines:")
    for line in lines:
        print("  ", " ".join(w if len(w) < 60 else "..." + w[-30:] for w in line.split()))


if __name__ == "__main__":
    main()
