"""pytest plugin (installed with kvax-testing): fake CPU devices and mesh fixtures.

Ask for N fake CPU devices with the ini option `kvax_fake_devices = "8"` or `--kvax-fake-devices 8`;
they are set in pytest_configure, before any test imports run JAX. If JAX has already started by
then, the session stops with an error rather than running sharded tests on one device.

Under pytest-xdist each worker gets JAX's platform allocator (XLA_PYTHON_CLIENT_ALLOCATOR=platform,
unless the variable is set): workers sharing one GPU then hand back each test's memory at once,
where the default pools would keep every worker's peak (eight workers ran an H100 out of memory
on the float64 references). A GPU-only setting: CPU runs are unaffected.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import shlex

import pytest

from kvax_testing import mesh as _mesh


def pytest_addoption(parser):
    parser.addini("kvax_fake_devices", "number of fake CPU devices for JAX (0: leave alone)",
                  default="0")
    parser.addoption("--kvax-fake-devices", type=int, default=None,
                     help="number of fake CPU devices for JAX; overrides the ini option")
    parser.addoption("--kvax-mesh-platform", default="cpu", choices=("cpu", "gpu"),
                     help="devices the fake_mesh fixture builds meshes from (gpu: real GPUs)")
    parser.addoption("--kvax-report", default=None, metavar="PATH",
                     help="write a Markdown report of this run (command, versions, devices, "
                          "every test's outcome) to PATH")


def share_gpu_between_workers(environ=os.environ) -> None:
    """In a pytest-xdist worker, JAX's platform allocator unless one is chosen (module doc)."""
    if "PYTEST_XDIST_WORKER" in environ:
        environ.setdefault("XLA_PYTHON_CLIENT_ALLOCATOR", "platform")


def pytest_configure(config):
    share_gpu_between_workers()
    count = config.getoption("--kvax-fake-devices")
    if count is None:
        count = int(config.getini("kvax_fake_devices") or 0)
    config._kvax_fake_devices = count
    if count > 0:
        try:
            _mesh.set_fake_cpu_devices(count)
        except _mesh.FakeDevicesError as err:
            raise pytest.UsageError(str(err)) from err


@pytest.fixture(scope="session")
def fake_device_count(pytestconfig) -> int:
    """The number of fake CPU devices this session asked for."""
    return pytestconfig._kvax_fake_devices


@pytest.fixture(scope="session")
def mesh_device_count(pytestconfig) -> int:
    """How many devices fake_mesh can use: the fake CPU devices, or the real GPUs with
    --kvax-mesh-platform gpu (so sharded tests can size their meshes to 2 or 4 GPUs)."""
    import jax

    return len(jax.devices(pytestconfig.getoption("--kvax-mesh-platform")))


@pytest.fixture
def fake_mesh(pytestconfig):
    """Factory: fake_mesh((2, 4), ("data", "context")) -> a jax Mesh of fake CPU devices (of real
    GPUs with --kvax-mesh-platform gpu)."""
    import functools

    platform = pytestconfig.getoption("--kvax-mesh-platform")
    return functools.partial(_mesh.fake_mesh, platform=platform)


def _versions() -> dict:
    import importlib.metadata as md

    out = {"python": platform.python_version()}
    for name in ("jax", "jaxlib", "jax-triton", "triton", "jax-cuda13-plugin", "numpy", "torch"):
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            pass
    return out


def _command(config) -> str:
    """pytest's arguments as given, also when pytest.main was called from a script (there
    sys.argv is the script's)."""
    return "pytest " + shlex.join(config.invocation_params.args)


def _devices() -> str:
    import jax

    devices = jax.devices()
    return f"{len(devices)} x {devices[0].device_kind} ({jax.default_backend()})"


def pytest_sessionstart(session):
    session.config._kvax_session = session
    path = session.config.getoption("--kvax-report")
    if path and not hasattr(session.config, "workerinput"):  # xdist workers: the controller's
        session.config._kvax_report = Report(session.config, path)
        session.config.pluginmanager.register(session.config._kvax_report, "kvax-report")


class Report:
    """The --kvax-report file. It is written again as each test's outcome arrives, so a run
    killed before its end (a timeout's KILL, a machine taken back) leaves what ran, marked as
    still running; pytest's summary writes the final one with the exit status."""

    def __init__(self, config, path: str):
        self.config, self.path = config, path
        self.rows: dict[str, tuple[str, str, str]] = {}  # nodeid -> (outcome, time, detail)
        self.header: list[str] | None = None  # the same every time: the devices asked once

    def pytest_runtest_logreport(self, report) -> None:
        self.add(report)
        if report.when == "teardown":  # once a test, when its row is known
            self.write()

    def add(self, rep) -> None:
        """A test's setup, call or teardown report, counted as pytest's summary counts it."""
        outcome = self.config.hook.pytest_report_teststatus(report=rep, config=self.config)[0]
        if outcome not in ("passed", "failed", "error", "skipped", "xfailed", "xpassed"):
            return
        if rep.when not in ("call", "setup") or (outcome == "passed" and rep.when != "call"):
            return
        detail = ""
        if outcome == "skipped" and isinstance(rep.longrepr, tuple):
            detail = rep.longrepr[2]
        elif outcome in ("failed", "error"):
            detail = str(rep.longrepr).strip().splitlines()[-1][:200]
        self.rows[rep.nodeid] = (outcome, f"{rep.duration:.1f}s", detail)

    def text(self, exitstatus=None) -> tuple[str, str | None]:
        if self.header is None:
            self.header = [
                f"- command: `{_command(self.config)}`",
                f"- devices: {_devices()}",
                f"- host: {platform.node()} {platform.machine()}",
                f"- versions: {json.dumps(_versions())}",
            ]
        counts: dict[str, int] = {}
        for outcome, _, _ in self.rows.values():
            counts[outcome] = counts.get(outcome, 0) + 1
        if exitstatus is None:
            status = (f"running ({len(self.rows)} done so far; this file is rewritten as each "
                      "test ends)")
            not_run = None
        else:
            status, not_run = str(int(exitstatus)), _not_run(self.config, len(self.rows))
        lines = [
            "# Test report",
            "",
            f"- date: {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}",
            *self.header,
            f"- exit status: {status}",
            f"- totals: {json.dumps(counts)}",
            *([not_run] if not_run else []),
            "",
            "| test | outcome | time | detail |",
            "|---|---|---|---|",
            *(f"| `{n}` | {o} | {t} | {d} |" for n, (o, t, d) in sorted(self.rows.items())),
            "",
        ]
        return "\n".join(lines), not_run

    def write(self, exitstatus=None) -> str | None:
        """Writes the file (atomically: a reader never sees half of it); returns the line
        saying how many selected tests did not run, if some did not."""
        text, not_run = self.text(exitstatus)
        partial = f"{self.path}.partial"
        with open(partial, "w") as f:
            f.write(text)
        os.replace(partial, self.path)
        return not_run


def _not_run(config, ran: int) -> str | None:
    """A line for the report when fewer tests ran than were selected (a run stopped by a timeout,
    pytest.exit or an interrupt can end with exit status 0 under pytest-xdist), else None."""
    session = getattr(config, "_kvax_session", None)
    selected = getattr(session, "testscollected", 0)
    if ran >= selected:
        return None
    return f"- **incomplete: {selected - ran} of {selected} selected tests did not run**"


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter, exitstatus, config):
    report = getattr(config, "_kvax_report", None)
    if report is None:
        return
    not_run = report.write(exitstatus)
    terminalreporter.write_line(f"kvax report written to {report.path}")
    if not_run:
        terminalreporter.write_line(not_run.strip("- *"), red=True)
