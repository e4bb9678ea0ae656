"""Devices, device attributes, tvm.runtime.enabled, tvm.runtime.num_threads."""

import os
import platform

import pytest

import tvm
from tvm._ffi.base import TVMError

import tvmrt_helpers as H


def test_cpu_device():
    d = tvm.cpu(0)
    assert (d.device_type, d.device_id) == (1, 0)
    assert str(d) == "cpu(0)"
    assert d.exist is True
    assert tvm.cpu(5).exist is True  # any CPU id exists
    d.sync()


def test_device_constructors():
    assert tvm.device("cpu") == tvm.cpu(0)
    assert tvm.device("cpu", 2) == tvm.cpu(2)
    assert tvm.device("llvm", 1) == tvm.cpu(1)
    assert tvm.device("cuda:1") == tvm.cuda(1)
    assert tvm.device(1, 3) == tvm.cpu(3)
    assert tvm.device("cuda").device_type == 2
    assert tvm.device("vulkan").device_type == 7
    with pytest.raises(ValueError):
        tvm.device("no_such_device")


@pytest.mark.parametrize(
    "attr",
    [
        "max_threads_per_block",
        "warp_size",
        "max_shared_memory_per_block",
        "compute_version",
        "device_name",
        "max_clock_rate",
        "multi_processor_count",
        "api_version",
        "driver_version",
        "l2_cache_size_bytes",
    ],
)
def test_cpu_absent_attributes_are_none(attr):
    assert getattr(tvm.cpu(0), attr) is None


@pytest.mark.parametrize("kind", [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13])
def test_cpu_raw_device_attributes(kind):
    # runtime.GetDeviceAttr: the CPU answers only kExist (0) and, from v0.20, kTotalGlobalMemory
    # (14); everything else is None (kMaxThreadDimensions = 8 included, which TVM's Python
    # property then fails to json-decode)
    assert tvm.cpu(0)._GetDeviceAttr(1, 0, kind) is None


def test_cpu_exist_raw():
    assert tvm.cpu(0)._GetDeviceAttr(1, 0, 0) == 1


def test_cpu_total_global_memory():
    # TVM 0.16's CPU device has no kTotalGlobalMemory (None); v0.20 reports sysinfo's total RAM
    v = tvm.cpu(0).total_global_memory
    if v is not None:
        expect = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        assert isinstance(v, int) and abs(v - expect) <= os.sysconf("SC_PAGE_SIZE")


def _gpu_present():
    return os.path.exists("/dev/nvidia0") or os.path.exists("/dev/nvidiactl")


def _vulkan_present():
    icd = os.environ.get("VK_ICD_FILENAMES", "")
    return bool(icd and os.path.exists(icd)) or (
        os.path.isdir("/usr/share/vulkan/icd.d") and bool(os.listdir("/usr/share/vulkan/icd.d"))
    )


def _opencl_present():
    d = "/etc/OpenCL/vendors"
    return os.path.isdir(d) and bool(os.listdir(d))


@pytest.mark.parametrize(
    "ctor", [tvm.cuda, tvm.vulkan, tvm.opencl, tvm.metal, tvm.rocm], ids=lambda c: c.__name__
)
def test_absent_gpu_devices_do_not_exist(ctor):
    if ctor is tvm.cuda and _gpu_present():
        H.skip("this machine has an NVIDIA GPU")
    if ctor is tvm.vulkan and _vulkan_present():
        H.skip("this machine has a Vulkan driver")
    if ctor is tvm.opencl and H.IS_OURS and _opencl_present():
        H.skip("this machine has an OpenCL platform (ours has OpenCL; the reference has not)")
    assert ctor(0).exist is False


def test_absent_device_attribute_raises():
    if _gpu_present():
        H.skip("this machine has an NVIDIA GPU")
    with pytest.raises(Exception) as ei:
        tvm.cuda(0).max_threads_per_block
    assert "cuda" in str(ei.value)


def test_alloc_on_absent_device_raises():
    if _gpu_present():
        H.skip("this machine has an NVIDIA GPU")
    with pytest.raises(Exception) as ei:
        tvm.nd.empty((4,), "float32", tvm.cuda(0))
    assert "cuda" in str(ei.value)


# tvm.runtime.enabled: TVM answers from the global registry (src/runtime/module.cc
# RuntimeEnabled): "cpu" is always on; the others are on when their device API or code
# generator is registered; unknown names are an error.
_REGISTRY_KEY = {
    "cuda": "device_api.cuda",
    "gpu": "device_api.cuda",
    "opencl": "device_api.opencl",
    "cl": "device_api.opencl",
    "metal": "device_api.metal",
    "vulkan": "device_api.vulkan",
    "rpc": "device_api.rpc",
    "stackvm": "target.build.stackvm",
    "hexagon": "device_api.hexagon",
    "rocm": "device_api.rocm",
    "nvptx": "device_api.cuda",
}


def _registered(name):
    return tvm.get_global_func(name, allow_missing=True) is not None


def test_enabled_cpu():
    assert tvm.runtime.enabled("cpu")


@pytest.mark.parametrize(
    "target",
    [
        "cuda",
        "gpu",
        "vulkan",
        "rpc",
        "nvptx",
        "cl",
        "opencl",
        "hexagon",
        "rocm",
        "metal",
        "stackvm",
    ],
)
def test_enabled_follows_registry(target):
    assert bool(tvm.runtime.enabled(target)) == _registered(_REGISTRY_KEY[target])


@pytest.mark.parametrize(
    "target",
    [
        "llvm",
        "llvm -mtriple=x86_64-linux-gnu",
    ],
)
def test_enabled_llvm_runtime_only(target):
    assert not _registered("codegen.llvm_target_enabled")
    assert not tvm.runtime.enabled(target)


@pytest.mark.parametrize("target", ["no_such_target", "c"])
def test_enabled_unknown_target_raises(target):
    with pytest.raises(TVMError, match="Unknown optional runtime"):
        tvm.runtime.enabled(target)


# num_threads: fixed when the thread pool starts, so each case runs in a fresh interpreter.
_NUM_THREADS = "import tvm; print(tvm.runtime.num_threads())"


def test_num_threads_from_env():
    out = H.run_python(_NUM_THREADS, {"TVM_NUM_THREADS": "1"}, env_remove=["OMP_NUM_THREADS"])
    assert int(out.strip().splitlines()[-1]) == 1


def test_num_threads_in_process():
    n = tvm.runtime.num_threads()
    assert isinstance(n, int) and n >= 1
    if not (os.environ.get("TVM_NUM_THREADS") or os.environ.get("OMP_NUM_THREADS")):
        assert n <= (os.cpu_count() or 1)


def _physical_cores():
    """Cores (not SMT siblings) of this process's affinity mask, from sysfs."""
    cores = set()
    for cpu in os.sched_getaffinity(0):
        base = f"/sys/devices/system/cpu/cpu{cpu}/topology/"
        try:
            with open(base + "physical_package_id") as p, open(base + "core_id") as c:
                cores.add((p.read().strip(), c.read().strip()))
        except OSError:
            return len(os.sched_getaffinity(0))
    return len(cores)


def test_num_threads_default_x86():
    if platform.machine() not in ("x86_64", "AMD64"):
        H.skip("an x86-64 rule")
    out = H.run_python(_NUM_THREADS, env_remove=["TVM_NUM_THREADS", "OMP_NUM_THREADS"])
    got = int(out.strip().splitlines()[-1])
    if H.IS_OURS:
        # Documented difference: ours counts physical cores (SMT siblings once) where TVM
        # halves the logical CPU count on x86-64, guessing that SMT is on.
        assert got == _physical_cores()
    else:
        assert got == max(1, (os.cpu_count() or 1) // 2)
