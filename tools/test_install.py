"""The three packages install by themselves, as the README's Install section has users do, and
serve a user's code and test suite there: no workspace, no dev dependencies (matplotlib,
protobuf, flax), so a runtime import of one of those, a dependency left undeclared or a file
left out of a wheel fails here, where the workspace's environment would hide it.

The environment is made by uv (from its cache, at the lock's versions given as constraints, so
that it is quick and the same as CI's), from the packages' own metadata.
"""

import os
import shutil
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_docs import READMES, ROOT, TEST_FILE, python_blocks  # noqa: E402

PACKAGES = ["packages/kvax-core", "packages/kvax-dist", "packages/kvax-testing"]

# the public surface a user touches, without the dev dependencies
SMOKE = """
import importlib.metadata
import jax, jax.numpy as jnp, numpy as np
from kvax.ops import create_attention_mask, flash_attention
from kvax.utils import (PADDING_SEGMENT_ID, FlashAttentionParamsConfig, attention_specs,
                        permute_tokens_context_parallelism, unpermute_tokens_context_parallelism)
import kvax.nn, kvax_dist, kvax_testing
for name in ("matplotlib", "protobuf", "flax"):  # dev dependencies only
    try:
        raise AssertionError(name + " " + importlib.metadata.version(name) + " is installed")
    except importlib.metadata.PackageNotFoundError:
        pass
assert "/site-packages/kvax/" in kvax.__file__, kvax.__file__  # the wheel's, not the tree's
seg = jnp.array([[0] * 5 + [1] * 3 + [PADDING_SEGMENT_ID] * 2], jnp.int32)
pos = jnp.array([[0, 1, 2, 3, 4, 0, 1, 2, 0, 0]], jnp.int32)
rng = np.random.default_rng(0)
q, k, v = (jnp.asarray(rng.standard_normal((1, 10, n, 64)), jnp.bfloat16) for n in (4, 2, 2))
masks = create_attention_mask(pos, seg, pos, seg, calc_bwd_mask=True)
out = flash_attention(q, k, v, pos, seg, pos, seg, masks, scale=0.125)
assert out.shape == (1, 10, 4, 64) and bool(jnp.all(out[0, 8:] == 0)), out
print("smoke ok")
"""


def _uv() -> str | None:
    return os.environ.get("UV") or shutil.which("uv")


@pytest.mark.skipif(_uv() is None, reason="needs uv (the README's prerequisite)")
def test_the_packages_install_alone_and_serve_a_users_suite(tmp_path):
    uv, python = _uv(), tmp_path / "venv" / "bin" / "python"
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTHONPATH", "VIRTUAL_ENV")}

    def run(*args, **kwargs):
        done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600,
                              **kwargs)
        assert done.returncode == 0, (args, done.stdout[-3000:], done.stderr[-3000:])
        return done

    run(uv, "venv", "-q", "--python", sys.executable, str(tmp_path / "venv"))
    pins = run(uv, "export", "--frozen", "--no-dev", "--no-hashes", "--no-emit-workspace",
               "--all-packages", "-q", cwd=ROOT).stdout
    (tmp_path / "pins.txt").write_text(pins)
    # --no-sources: as pip does, kvax-dist's kvax-core comes from the path given, not from the
    # workspace (uv's own sources would install it editable, the tree on the path)
    run(uv, "pip", "install", "-q", "--no-sources", "--python", str(python), "-c",
        str(tmp_path / "pins.txt"), *PACKAGES, cwd=ROOT)

    work = tmp_path / "user"
    work.mkdir()
    env.update(JAX_PLATFORMS="cpu")
    assert "smoke ok" in run(str(python), "-c", SMOKE, cwd=work).stdout
    # the READMEs' test files (a user's suite), under the plugin the kvax-testing wheel registers
    names = []
    for block in (b for readme in READMES for b in python_blocks(readme) if TEST_FILE.match(b)):
        names.append(TEST_FILE.match(block).group(1))
        (work / names[-1]).write_text(block)
    (work / "pytest.ini").write_text("[pytest]\nkvax_fake_devices = 8\n")
    suite = run(str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", *names, cwd=work)
    assert len(names) >= 3 and " passed" in suite.stdout, suite.stdout[-3000:]
