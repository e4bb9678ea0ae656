"""Python functions as PackedFuncs: the global registry, every kind of argument and return
value, callbacks through the runtime, and errors crossing it in both directions."""

import ctypes
import gc
import itertools

import numpy as np
import pytest

import tvm
from tvm._ffi import registry
from tvm._ffi.base import _LIB, TVMError
from tvm.ir.container import Array, Map

_ids = itertools.count()


def fresh(prefix="f"):
    return f"tvmrt_pytest.{prefix}{next(_ids)}"


def reg(fn, name=None):
    """Registers fn under a fresh global name and returns (name, PackedFunc from the registry)."""
    name = name or fresh()
    tvm.register_func(name, fn)
    return name, tvm.get_global_func(name)


@pytest.fixture(autouse=True)
def _cleanup():
    yield
    for n in registry.list_global_func_names():
        if n.startswith("tvmrt_pytest."):
            registry.remove_global_func(n)


# ---------------------------------------------------------------------------------------------
# Registry


def test_register_and_get():
    name, f = reg(lambda a, b: a * 10 + b)
    assert isinstance(f, tvm.runtime.PackedFunc)
    assert f(4, 2) == 42
    assert name in registry.list_global_func_names()


def test_register_decorator_forms():
    name = fresh()

    @tvm.register_func(name)
    def mine(x):
        return x + 1

    assert tvm.get_global_func(name)(1) == 2

    @tvm.register_func
    def tvmrt_pytest_decorated(x):  # registered under the Python name
        return x * 3

    try:
        assert tvm.get_global_func("tvmrt_pytest_decorated")(5) == 15
    finally:
        registry.remove_global_func("tvmrt_pytest_decorated")


def test_get_missing():
    name = fresh("missing")
    with pytest.raises(ValueError, match="Cannot find global function"):
        tvm.get_global_func(name)
    assert tvm.get_global_func(name, allow_missing=True) is None


def test_override_semantics():
    name, f_old = reg(lambda: "first")
    with pytest.raises(Exception, match="already registered"):
        tvm.register_func(name, lambda: "second")
    assert tvm.get_global_func(name)() == "first"
    tvm.register_func(name, lambda: "third", override=True)
    assert tvm.get_global_func(name)() == "third"
    # a handle taken before the override keeps calling the old function
    assert f_old() == "first"


def test_remove_global():
    name, f = reg(lambda: 7)
    registry.remove_global_func(name)
    assert tvm.get_global_func(name, allow_missing=True) is None
    assert name not in registry.list_global_func_names()
    assert f() == 7  # the function object outlives its registry entry
    tvm.register_func(name, lambda: 8)  # the name is free again
    assert tvm.get_global_func(name)() == 8


def test_runtime_builtins_are_registered():
    names = set(registry.list_global_func_names())
    for n in [
        "runtime.String",
        "runtime.GetFFIString",
        "runtime.Array",
        "runtime.ArraySize",
        "runtime.ArrayGetItem",
        "runtime.Map",
        "runtime.MapSize",
        "runtime.MapGetItem",
        "runtime.MapCount",
        "runtime.MapItems",
        "runtime.ShapeTuple",
        "runtime.GetShapeTupleSize",
        "runtime.GetShapeTupleElem",
        "runtime.ModuleGetTypeKey",
        "runtime.ModuleLoadFromFile",
        "runtime.ModuleImportsSize",
        "runtime.ModuleGetImport",
        "runtime.TVMArrayAllocWithScope",
        "runtime.TVMArrayCreateView",
        "runtime.RuntimeEnabled",
        "runtime.NumThreads",
        "runtime.RPCTimeEvaluator",
        "runtime.SystemLib",
        "runtime.SaveParams",
        "runtime.LoadParams",
        "runtime.module.loadfile_so",
        "runtime.module.loadbinary_GraphExecutorFactory",
        "tvm.graph_executor.create",
        "device_api.cpu",
        "runtime.ObjectPtrHash",
    ]:
        assert n in names, n
    assert isinstance(tvm.get_global_func("runtime.GetFFIString"), tvm.runtime.PackedFunc)


# ---------------------------------------------------------------------------------------------
# Arguments and return values


@pytest.mark.parametrize(
    "value",
    [0, 1, -1, 2**62, -(2**63), 2**63 - 1, 0.5, -1e300, float("inf"), "", "text", "ünïcode ✓"],
    ids=lambda v: repr(v)[:20],
)
def test_identity_scalars(value):
    _, f = reg(lambda x: x)
    r = f(value)
    assert type(r) is type(value) and r == value


def test_identity_nan():
    _, f = reg(lambda x: x)
    assert np.isnan(f(float("nan")))


def test_bool_arrives_as_int():
    seen = []
    _, g = reg(lambda x: seen.append(x))
    g(True)
    g(False)
    assert seen == [1, 0] and all(type(v) is int for v in seen)


@pytest.mark.parametrize("payload", [b"", b"abc", b"a\x00b\xff", bytes(range(256)) * 10])
def test_bytes_arguments_and_returns(payload):
    seen = []

    def fn(b):
        seen.append(b)
        return bytearray(b[::-1])

    _, f = reg(fn)
    r = f(payload)
    assert isinstance(seen[0], bytearray) and bytes(seen[0]) == payload
    assert isinstance(r, bytearray) and bytes(r) == payload[::-1]
    assert bytes(f(bytearray(payload))) == payload[::-1]


def test_none_return_and_argument():
    _, f = reg(lambda *a: None)
    assert f() is None
    _, g = reg(lambda x: x is None)
    assert g(None) == 1


def test_argument_count_and_order():
    _, f = reg(lambda *args: ",".join(str(a) for a in args))
    assert f() == ""
    assert f(1, "b", 2.5, None) == "1,b,2.5,None"
    many = list(range(64))
    assert f(*many) == ",".join(map(str, many))


def test_ndarray_argument_and_return():
    src = np.arange(12, dtype="float32").reshape(3, 4)
    a = tvm.nd.array(src)

    def fn(x):
        assert isinstance(x, tvm.nd.NDArray)
        y = tvm.nd.empty(x.shape, x.dtype)
        y.copyfrom(x.numpy() * 2)
        return y

    _, f = reg(fn)
    r = f(a)
    assert isinstance(r, tvm.nd.NDArray) and r.shape == (3, 4)
    np.testing.assert_array_equal(r.numpy(), src * 2)
    _, ident = reg(lambda x: x)
    assert ident(a).same_as(a)  # the same array object comes back


def test_ndarray_returned_outlives_function():
    name, f = reg(lambda: tvm.nd.array(np.full(5, 7, "int16")))
    r = f()
    registry.remove_global_func(name)
    del f
    gc.collect()
    np.testing.assert_array_equal(r.numpy(), np.full(5, 7, "int16"))


def test_device_and_dtype_arguments():
    _, f = reg(lambda d: d)
    d = f(tvm.cpu(3))
    assert isinstance(d, tvm.runtime.Device) and d.device_type == 1 and d.device_id == 3
    _, g = reg(lambda t: t)
    assert g(tvm.DataType("float16")) == "float16"
    assert g(tvm.DataType("int8x4")) == "int8x4"


def test_opaque_handle_argument():
    _, f = reg(lambda h: h)
    r = f(ctypes.c_void_p(0x1234))
    assert isinstance(r, ctypes.c_void_p) and r.value == 0x1234


def test_module_argument_and_return():
    syslib = tvm.runtime.system_lib()
    _, f = reg(lambda m: m)
    r = f(syslib)
    assert isinstance(r, tvm.runtime.Module)
    assert r.type_key == "library"
    _, g = reg(lambda: tvm.runtime.system_lib())
    assert g().type_key == "library"


def test_function_return_and_argument():
    _, make_adder = reg(lambda k: (lambda x: x + k))
    add5 = make_adder(5)
    assert isinstance(add5, tvm.runtime.PackedFunc)
    assert add5(10) == 15
    _, ident = reg(lambda fn: fn)
    g = ident(add5)
    assert g(1) == 6
    assert ident(ident)(ident)(9) == 9


def test_callback_through_packed_function():
    # Python -> runtime -> Python (apply) -> runtime -> Python (the callback), and nested
    calls = []
    _, apply = reg(lambda fn, *args: fn(*args))
    assert apply(lambda a, b: a - b, 10, 3) == 7
    assert apply(lambda s: s.upper(), "abc") == "ABC"
    assert apply(lambda: calls.append(1)) is None and calls == [1]
    # the callback receives a packed function it calls back
    assert apply(lambda inner: inner(20) + 1, lambda v: v * 2) == 41
    # deep nesting
    depth = [0]

    def rec(n):
        depth[0] = max(depth[0], n)
        return n if n == 30 else apply(rec, n + 1)

    assert apply(rec, 0) == 30 and depth[0] == 30


def test_global_function_called_from_callback_by_name():
    name, _ = reg(lambda x: x * 3)
    _, g = reg(lambda n, x: tvm.get_global_func(n)(x) + 1)
    assert g(name, 4) == 13


@pytest.mark.parametrize(
    "make, check",
    [
        (
            lambda: ["a", "bc"],
            lambda r: isinstance(r, Array) and [str(x) for x in r] == ["a", "bc"],
        ),
        (lambda: [], lambda r: isinstance(r, Array) and len(r) == 0),
        (
            lambda: {"k": "v", "n": [tvm.nd.array(np.ones(2))]},
            lambda r: isinstance(r, Map) and r["k"] == "v" and r["n"][0].numpy().tolist() == [1, 1],
        ),
        (
            lambda: tvm.runtime.ShapeTuple([2, 3]),
            lambda r: isinstance(r, tvm.runtime.ShapeTuple) and list(r) == [2, 3],
        ),
        (lambda: tvm.runtime.String("s"), lambda r: isinstance(r, tvm.runtime.String) and r == "s"),
        (
            lambda: [tvm.nd.array(np.arange(3)), tvm.nd.array(np.zeros((2, 2)))],
            lambda r: [x.shape for x in r] == [(3,), (2, 2)],
        ),
    ],
    ids=["array_of_str", "empty_array", "map", "shape_tuple", "string", "array_of_ndarray"],
)
def test_container_returns(make, check):
    _, f = reg(make)
    assert check(f())


def test_containers_as_arguments():
    seen = {}

    def fn(arr, mp, st, s):
        seen["types"] = [type(x).__name__ for x in (arr, mp, st, s)]
        return len(arr) * 1000 + len(mp) * 100 + sum(st) + len(s)

    _, f = reg(fn)
    r = f(["x", "y"], {"a": "b"}, tvm.runtime.ShapeTuple([3, 4]), "abcd")
    assert r == 2000 + 100 + 7 + 4
    assert seen["types"] == ["Array", "Map", "ShapeTuple", "str"]


# ---------------------------------------------------------------------------------------------
# Errors


@pytest.mark.parametrize(
    "exc",
    [
        ValueError,
        TypeError,
        KeyError,
        IndexError,
        AttributeError,
        RuntimeError,
        NotImplementedError,
        ZeroDivisionError,
    ],
)
def test_python_exception_comes_back(exc):
    def fn():
        raise exc("detail 1234")

    _, f = reg(fn)
    with pytest.raises(exc) as ei:
        f()
    assert "detail 1234" in str(ei.value)


def test_python_exception_same_object_and_chain():
    err = ValueError("the one")

    def fn():
        raise err

    _, f = reg(fn)
    with pytest.raises(ValueError) as ei:
        f()
    assert ei.value is err


def test_exception_from_nested_callback():
    _, apply = reg(lambda fn, x: fn(x) + 1)

    def bad(x):
        raise KeyError(f"inner {x}")

    with pytest.raises(KeyError, match="inner 7"):
        apply(bad, 7)
    # and the runtime is still fine afterwards
    assert apply(lambda x: x * 2, 7) == 15


def test_custom_error_type():
    @tvm.error.register_error
    class TvmrtPytestError(RuntimeError):
        pass

    def fn():
        raise TvmrtPytestError("custom message 99")

    _, f = reg(fn)
    with pytest.raises(TvmrtPytestError, match="custom message 99"):
        f()
    _, apply = reg(lambda g: g())
    with pytest.raises(TvmrtPytestError, match="custom message 99"):
        apply(fn)


# A C callback (no Python exception object) that sets the error text through
# TVMAPISetLastError: Python finds the error class from the "Name: " prefix of the message that
# TVMGetLastError returns, so the runtime must keep the text intact.
from tvm._ffi._ctypes.packed_func import _make_packed_func  # noqa: E402
from tvm._ffi._ctypes.types import TVMPackedCFunc  # noqa: E402

_keep = []


def c_error_func(msg):
    def cfun(args, tcodes, nargs, ret, _):
        _LIB.TVMAPISetLastError(msg.encode())
        return -1

    cf = TVMPackedCFunc(cfun)
    _keep.append(cf)
    h = ctypes.c_void_p()
    assert _LIB.TVMFuncCreateFromCFunc(cf, None, None, ctypes.byref(h)) == 0
    return _make_packed_func(h, False)


@tvm.error.register_error
class TvmrtPytestCError(RuntimeError):
    pass


@pytest.mark.parametrize(
    "msg, cls",
    [
        ("ValueError: c value 1", ValueError),
        ("TypeError: c type 2", TypeError),
        ("IndexError: c index 3", IndexError),
        ("AttributeError: c attr 4", AttributeError),
        ("InternalError: c internal 5", tvm.error.InternalError),
        ("TvmrtPytestCError: c custom 6", TvmrtPytestCError),
        ("tvm.error.TvmrtPytestCError: c custom 7", TvmrtPytestCError),
        ("plain message 8", TVMError),
        ("NotARegisteredName: c 9", TVMError),
    ],
)
def test_error_text_set_in_c(msg, cls):
    f = c_error_func(msg)
    with pytest.raises(cls) as ei:
        f()
    assert type(ei.value) is cls
    assert msg.split(": ")[-1] in str(ei.value)
    # through a Python callback in between
    _, apply = reg(lambda g: g())
    with pytest.raises(cls) as ei:
        apply(f)
    assert type(ei.value) is cls
    assert msg.split(": ")[-1] in str(ei.value)


def test_last_error_reported_after_success():
    # an error, then a successful call, then another error: each raise shows its own message
    f1 = c_error_func("ValueError: first failure")
    f2 = c_error_func("TypeError: second failure")
    _, ok = reg(lambda: 1)
    with pytest.raises(ValueError, match="first failure"):
        f1()
    assert ok() == 1
    with pytest.raises(TypeError, match="second failure") as ei:
        f2()
    assert "first failure" not in str(ei.value)


def test_errors_are_per_thread():
    # The last-error slot is thread-local: threads failing at the same time each see their own
    # message, and a success in one thread does not clear another's error.
    import threading

    def fn(k, fail):
        if fail:
            raise ValueError(f"thread error {k}")
        return k

    _, f = reg(fn)
    n, rounds = 4, 50
    barrier = threading.Barrier(n)
    problems = []

    def worker(k):
        try:
            barrier.wait()
            for i in range(rounds):
                fail = (i + k) % 2 == 0
                if fail:
                    try:
                        f(k, True)
                        problems.append(f"{k}: no error")
                    except ValueError as e:
                        if str(e) != f"thread error {k}":
                            problems.append(f"{k}: got {e}")
                else:
                    if f(k, False) != k:
                        problems.append(f"{k}: bad value")
                c = c_error_func(f"TypeError: c thread {k} {i}")
                try:
                    c()
                except TypeError as e:
                    if f"c thread {k} {i}" not in str(e):
                        problems.append(f"{k}: got {e}")
        except Exception as e:  # noqa: BLE001
            problems.append(f"{k}: {e!r}")

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    assert not problems, problems[:5]
