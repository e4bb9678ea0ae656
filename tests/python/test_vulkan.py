"""Vulkan through TVM's own Python package: device attributes and NDArray copies in every
direction. Runs where the loaded runtime has a Vulkan device (ours on lavapipe); skips
elsewhere (the reference wheel is built without Vulkan). On ours a missing device fails
under TVMRT_REQUIRE_VULKAN (the test command sets it where lavapipe is installed)."""

import numpy as np
import pytest
import tvm

import tvmrt_helpers as H


@pytest.fixture(autouse=True)
def vulkan_device():
    if not tvm.vulkan(0).exist:
        if H.IS_OURS:
            H.skip("no Vulkan device", "TVMRT_REQUIRE_VULKAN")
        H.skip("no Vulkan device (the reference wheel is built without Vulkan)")


def test_attributes():
    d = tvm.vulkan(0)
    assert d.max_threads_per_block >= 128
    assert d.warp_size == 1
    assert d.max_shared_memory_per_block >= 16384
    assert d.compute_version.startswith("1.")
    assert d.device_name
    dims = d.max_thread_dimensions
    assert len(dims) == 3 and all(x >= 1 for x in dims)
    attr = tvm.get_global_func("runtime.GetDeviceAttr")
    assert attr(7, 0, 14) > 0  # total global memory
    assert attr(7, 0, 15) is None  # available global memory: no answer, as the reference
    assert d.multi_processor_count is None


@pytest.mark.parametrize("n", [1, 3, 1023, 65537])
def test_copies_every_direction(n):
    rng = np.random.default_rng(n)
    a = rng.standard_normal(n).astype("float32")
    x = tvm.nd.array(a, tvm.vulkan(0))
    np.testing.assert_array_equal(x.numpy(), a)
    y = tvm.nd.empty((n,), "float32", tvm.vulkan(0))
    x.copyto(y)
    np.testing.assert_array_equal(y.numpy(), a)
    h = tvm.nd.empty((n,), "float32", tvm.cpu(0))
    y.copyto(h)
    np.testing.assert_array_equal(h.numpy(), a)
    y.copyfrom(a[::-1].copy())
    np.testing.assert_array_equal(y.numpy(), a[::-1])


def test_sync_and_enabled():
    tvm.vulkan(0).sync()
    assert tvm.runtime.enabled("vulkan")
