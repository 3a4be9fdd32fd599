"""pytest plugin (installed with kvax-testing): fake CPU devices and mesh fixtures.

Ask for N fake CPU devices with the ini option `kvax_fake_devices = "8"` or `--kvax-fake-devices 8`;
they are set in pytest_configure, before any test imports run JAX. If JAX has already started by
then, the session stops with an error rather than running sharded tests on one device.
"""

from __future__ import annotations

import pytest

from kvax_testing import mesh as _mesh


def pytest_addoption(parser):
    parser.addini("kvax_fake_devices", "number of fake CPU devices for JAX (0: leave alone)",
                  default="0")
    parser.addoption("--kvax-fake-devices", type=int, default=None,
                     help="number of fake CPU devices for JAX; overrides the ini option")


def pytest_configure(config):
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


@pytest.fixture
def fake_mesh():
    """Factory: fake_mesh((2, 4), ("data", "context")) -> a jax Mesh of fake CPU devices."""
    return _mesh.fake_mesh
