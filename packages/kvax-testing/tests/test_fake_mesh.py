import jax
import pytest

from kvax_testing import FakeDevicesError, set_fake_cpu_devices


def test_plugin_set_fake_devices(fake_device_count):
    assert fake_device_count == 8
    assert len(jax.devices("cpu")) == 8


def test_fake_mesh_fixture(fake_mesh):
    mesh = fake_mesh((2, 4), ("data", "context"))
    assert mesh.shape == {"data": 2, "context": 4}
    with pytest.raises(FakeDevicesError, match="needs 16 cpu devices"):
        fake_mesh((4, 4), ("a", "b"))


def test_late_request_fails_loudly():
    jax.numpy.ones(1).block_until_ready()  # JAX has started
    set_fake_cpu_devices(8)  # same count: nothing to do
    with pytest.raises(FakeDevicesError, match="already started"):
        set_fake_cpu_devices(3)


def test_fake_mesh_axis_types_match_make_mesh(fake_mesh):
    """Users' meshes come from jax.make_mesh; the fixture gives the same axis types by default."""
    users = jax.make_mesh((2, 4), ("data", "context"), devices=jax.devices("cpu")[:8])
    assert fake_mesh((2, 4), ("data", "context")).axis_types == users.axis_types
    auto = fake_mesh((2, 4), ("data", "context"), explicit=False)
    assert set(auto.axis_types) == {jax.sharding.AxisType.Auto}


def test_xdist_workers_get_the_platform_allocator_unless_one_is_chosen():
    from kvax_testing.pytest_plugin import share_gpu_between_workers

    worker = {"PYTEST_XDIST_WORKER": "gw3"}
    share_gpu_between_workers(worker)
    assert worker["XLA_PYTHON_CLIENT_ALLOCATOR"] == "platform"
    chosen = {"PYTEST_XDIST_WORKER": "gw0", "XLA_PYTHON_CLIENT_ALLOCATOR": "bfc"}
    share_gpu_between_workers(chosen)
    assert chosen["XLA_PYTHON_CLIENT_ALLOCATOR"] == "bfc"
    alone = {}
    share_gpu_between_workers(alone)
    assert alone == {}
