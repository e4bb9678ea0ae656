"""Libraries compiled by TVM v0.27 (the tvm-ffi ABI; scripts/build_ffi_fixtures.py) driven by
TVM 0.16's classic Python client. Ours runs them with TVM 0.27's own outputs; the reference
(TVM 0.16's runtime) cannot load them at all, which the tests check too.
"""

import ctypes
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tvm
import tvmrt_helpers as H
from tvmrt_helpers import CACHE, IS_OURS, LOADED_LIB

FFI_FIXTURES = os.path.join(CACHE, "ffi_fixtures")
FFI_LIB = os.path.join(
    CACHE, "venv-ffi", "lib", "python3.11", "site-packages", "tvm_ffi", "lib", "libtvm_ffi.so"
)


def fixture(name):
    path = os.path.join(FFI_FIXTURES, "manifest.json")
    if not os.path.isfile(path):
        H.skip(
            f"tvm-ffi fixtures not built: no {path} (run scripts/build_ffi_fixtures.py)",
            H.REQUIRE_FIXTURES,
        )
    with open(path) as f:
        entry = json.load(f)[name]
    return os.path.join(FFI_FIXTURES, entry["file"]), np.load(os.path.join(FFI_FIXTURES, entry["data"]))


def load(name, func):
    so, data = fixture(name)
    if not IS_OURS:
        # The reference opens any shared library, but finds none of its kernels.
        with pytest.raises((tvm.TVMError, AttributeError)):
            tvm.runtime.load_module(so)[func]
        H.skip("the reference (TVM 0.16) cannot run tvm-ffi libraries (checked)")
    return tvm.runtime.load_module(so), data


def test_te_kernel():
    mod, d = load("add", "add")
    z = tvm.nd.array(np.zeros_like(d["z"]))
    mod["add"](tvm.nd.array(d["x"]), tvm.nd.array(d["y"]), z)
    np.testing.assert_array_equal(z.numpy(), d["z"])
    z2 = tvm.nd.array(np.zeros_like(d["z"]))
    mod.entry_func(tvm.nd.array(d["x"]), tvm.nd.array(d["y"]), z2)
    np.testing.assert_array_equal(z2.numpy(), d["z"])


def test_kernel_argument_errors_raise_tvms_exception_classes():
    mod, _ = load("add", "add")
    a = tvm.nd.array(np.ones(4, "float32"))
    b = tvm.nd.array(np.ones(5, "float32"))
    with pytest.raises(ValueError, match="Mismatched"):
        mod["add"](a, a, b)
    with pytest.raises(TypeError, match="Expected 3 arguments"):
        mod["add"](a, a)


def test_parallel_kernel_with_workspace():
    mod, d = load("kernels", "par_ws")
    out = tvm.nd.array(np.zeros_like(d["wb"]))
    mod["par_ws"](tvm.nd.array(d["wa"]), out)
    np.testing.assert_array_equal(out.numpy(), d["wb"])


def test_kernel_calls_a_python_function():
    mod, d = load("kernels", "callpk")
    calls = []

    def scale(a, b, n, factor):
        calls.append(n)
        src = (ctypes.c_float * n).from_address(a.value)
        dst = (ctypes.c_float * n).from_address(b.value)
        for i in range(n):
            dst[i] = src[i] * factor

    tvm.register_func("tvmrt_test.ffi_scale", scale, override=True)
    out = tvm.nd.array(np.zeros_like(d["cb"]))
    mod["callpk"](tvm.nd.array(d["ca"]), out)
    np.testing.assert_array_equal(out.numpy(), d["cb"])
    assert calls == [8]


# A process that opens the runtime RTLD_LOCAL (as Java's System.loadLibrary does), optionally
# after TVM's own libtvm_ffi.so, and hits a kernel's error path through the C API.
_LOCAL_HOST = textwrap.dedent(
    """
    import ctypes, sys
    if sys.argv[3]:
        ctypes.CDLL(sys.argv[3], mode=ctypes.RTLD_GLOBAL)
    rt = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_LOCAL)
    rt.TVMGetLastError.restype = ctypes.c_char_p
    m, f = ctypes.c_void_p(), ctypes.c_void_p()
    assert rt.TVMModLoadFromFile(sys.argv[2].encode(), b"so", ctypes.byref(m)) == 0, rt.TVMGetLastError()
    assert rt.TVMModGetFunction(m, b"add", 0, ctypes.byref(f)) == 0
    arrs = []
    for n in (4, 4, 5):
        h = ctypes.c_void_p()
        shape = (ctypes.c_int64 * 1)(n)
        assert rt.TVMArrayAlloc(shape, 1, 2, 32, 1, 1, 0, ctypes.byref(h)) == 0
        arrs.append(h)
    vals = (ctypes.c_void_p * 3)(*[a.value for a in arrs])
    codes = (ctypes.c_int * 3)(7, 7, 7)
    rv, rc = ctypes.c_int64(), ctypes.c_int()
    r = rt.TVMFuncCall(f, vals, codes, 3, ctypes.byref(rv), ctypes.byref(rc))
    print(r, rt.TVMGetLastError().decode().splitlines()[0])
    """
)


def run_local_host(extra_lib):
    so, _ = fixture("add")
    if not IS_OURS:
        H.skip("the reference (TVM 0.16) cannot run tvm-ffi libraries")
    out = subprocess.run(
        [sys.executable, "-c", _LOCAL_HOST, LOADED_LIB, so, extra_lib],
        capture_output=True, text=True, timeout=60, env={"PATH": os.environ.get("PATH", "")},
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_error_symbol_resolves_with_the_runtime_opened_rtld_local():
    assert run_local_host("") == "-1 ValueError: Mismatched C.shape[0] on argument #2 when calling:"


def test_tvms_own_libtvm_ffi_keeps_its_symbol_and_errors_still_arrive():
    if not os.path.isfile(FFI_LIB):
        H.skip(f"no {FFI_LIB}", H.REQUIRE_FIXTURES)
    assert run_local_host(FFI_LIB) == "-1 ValueError: Mismatched C.shape[0] on argument #2 when calling:"


@pytest.mark.parametrize(
    "name,calls",
    [
        ("mlp", [(["x", "w1", "w2"], "y")]),
        ("mlp_dyn", [(["x5", "w1", "w2"], "y5"), (["x2", "w1", "w2"], "y2")]),
        ("const", [(["x"], "y")]),
    ],
)
def test_relax_models_on_tvm_016s_virtual_machine(name, calls):
    from tvm.runtime import relax_vm

    so, d = fixture(name)
    if not IS_OURS:
        with pytest.raises((tvm.TVMError, AttributeError, ValueError)):
            relax_vm.VirtualMachine(tvm.runtime.load_module(so), tvm.cpu())
        H.skip("the reference (TVM 0.16) cannot run tvm-ffi libraries (checked)")
    vm = relax_vm.VirtualMachine(tvm.runtime.load_module(so), tvm.cpu())
    for args, result in calls:
        out = vm["main"](*[tvm.nd.array(d[k]) for k in args])
        np.testing.assert_array_equal(out.numpy(), d[result])
