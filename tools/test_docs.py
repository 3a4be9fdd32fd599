"""Every Python block of the READMEs runs, so the docs cannot drift from the code.

Blocks of one README run in order in one fresh process with 8 fake CPU devices (later blocks may
use names earlier ones defined). A block whose first line names a test file (`# test_*.py`) is
written to that file beside a pytest.ini with `kvax_fake_devices = 8` and run by pytest, which
must pass every test in it.
"""

import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
READMES = [ROOT / "README.md", *sorted(ROOT.glob("packages/*/README.md"))]
TEST_FILE = re.compile(r"^# (test_\w+\.py)")


def python_blocks(path: pathlib.Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", path.read_text(), re.S | re.M)


def env() -> dict:
    return dict(os.environ, JAX_NUM_CPU_DEVICES="8", JAX_PLATFORMS="cpu")


@pytest.mark.parametrize("readme", READMES, ids=lambda p: str(p.relative_to(ROOT)))
def test_readme_python_blocks_run(readme, tmp_path):
    blocks = python_blocks(readme)
    scripts = [b for b in blocks if not TEST_FILE.match(b)]
    tests = [b for b in blocks if TEST_FILE.match(b)]
    if readme.name == "README.md" and readme.parent == ROOT:
        assert scripts and tests, "the workspace README shows usage and a downstream test"
    if scripts:
        script = tmp_path / "readme_blocks.py"
        script.write_text("\n\n".join(scripts))
        run = subprocess.run([sys.executable, str(script)], env=env(), cwd=tmp_path,
                             capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stderr[-4000:]
    for block in tests:
        name = TEST_FILE.match(block).group(1)
        (tmp_path / name).write_text(block)
        (tmp_path / "pytest.ini").write_text("[pytest]\nkvax_fake_devices = 8\n")
        run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                              str(tmp_path / name)], env=env(), cwd=tmp_path,
                             capture_output=True, text=True, timeout=600)
        assert run.returncode == 0 and " passed" in run.stdout and "failed" not in run.stdout, (
            run.stdout[-4000:] + run.stderr[-2000:])
