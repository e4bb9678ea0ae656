"""tvm.runtime.convert and the runtime containers: String, Array, Map, ShapeTuple."""

import gc

import numpy as np
import pytest

import tvm
from tvm.ir.container import Array, Map
from tvm.runtime import ShapeTuple, String
from tvm.runtime import _ffi_api


def test_string():
    s = tvm.runtime.convert("héllo wörld")
    assert isinstance(s, String) and isinstance(s, str)
    assert s == "héllo wörld" and len(s) == 11
    assert hash(s) == hash("héllo wörld")
    assert _ffi_api.GetFFIString(s) == "héllo wörld"
    assert String("") == ""
    big = "x" * 100_000
    assert String(big) == big


def test_array_of_ndarrays():
    a1 = tvm.nd.array(np.arange(3, dtype="int32"))
    a2 = tvm.nd.array(np.ones((2, 2)))
    arr = tvm.runtime.convert([a1, a2])
    assert isinstance(arr, Array)
    assert len(arr) == 2
    assert arr[0].same_as(a1) and arr[1].same_as(a2)  # elements are shared, not copied
    assert arr[-1].same_as(a2)
    np.testing.assert_array_equal(arr[0].numpy(), [0, 1, 2])
    assert [x.shape for x in arr] == [(3,), (2, 2)]
    assert [x.dtype for x in arr[0:2]] == ["int32", "float64"]
    with pytest.raises(IndexError):
        arr[2]
    del a1, a2
    gc.collect()
    np.testing.assert_array_equal(arr[0].numpy(), [0, 1, 2])  # the array holds references


def test_array_of_strings_and_nesting():
    arr = tvm.runtime.convert(["a", "bc", ["d", ["e"]]])
    assert len(arr) == 3
    assert arr[0] == "a" and isinstance(arr[0], String)
    assert arr[1] == "bc"
    assert isinstance(arr[2], Array) and arr[2][0] == "d" and arr[2][1][0] == "e"
    assert len(tvm.runtime.convert([])) == 0
    assert len(tvm.runtime.convert(tuple(["p", "q"]))) == 2


def test_array_identity_and_hash():
    arr = tvm.runtime.convert(["a"])
    same = arr
    assert arr == same and hash(arr) == hash(same)
    other = tvm.runtime.convert(["a"])
    assert arr != other  # Object equality is identity
    assert _ffi_api.ObjectPtrHash(arr) == arr.handle.value


def test_array_builtins_directly():
    a = _ffi_api.Array(String("x"), String("y"), String("z"))
    assert _ffi_api.ArraySize(a) == 3
    assert _ffi_api.ArrayGetItem(a, 1) == "y"
    assert _ffi_api.ArraySize(_ffi_api.Array()) == 0


def test_map_with_string_keys():
    nd = tvm.nd.array(np.arange(4, dtype="float32"))
    m = tvm.runtime.convert({"x": nd, "y": "s", "z": ["q"]})
    assert isinstance(m, Map)
    assert len(m) == 3
    assert sorted(m.keys()) == ["x", "y", "z"]
    assert m["x"].same_as(nd)
    assert m["y"] == "s"
    assert isinstance(m["z"], Array) and m["z"][0] == "q"
    assert "x" in m and "w" not in m
    assert m.get("w", 7) == 7 and m.get("y") == "s"
    items = dict(m.items())
    assert set(items) == {"x", "y", "z"} and items["y"] == "s"
    assert sorted(type(v).__name__ for v in m.values()) == ["Array", "NDArray", "String"]
    assert len(tvm.runtime.convert({})) == 0


def test_map_missing_key_raises():
    m = tvm.runtime.convert({"a": "b"})
    with pytest.raises(Exception):
        m["nope"]


def test_map_object_keys():
    k1, k2 = tvm.nd.array(np.zeros(1)), tvm.nd.array(np.zeros(1))
    m = tvm.runtime.convert({k1: "one", k2: "two"})
    assert len(m) == 2
    assert m[k1] == "one" and m[k2] == "two"  # keyed by identity
    assert k1 in m


def test_map_many_entries():
    d = {f"key{i}": f"val{i}" for i in range(300)}
    m = tvm.runtime.convert(d)
    assert len(m) == 300
    assert dict(m.items()) == d
    assert all(m[k] == v for k, v in d.items())


def test_shape_tuple():
    st = ShapeTuple([1, 2, 3])
    assert len(st) == 3
    assert st[0] == 1 and st[2] == 3 and st[-1] == 3
    assert list(st) == [1, 2, 3]
    assert [x for x in st] == [1, 2, 3]
    assert st[1:] == [2, 3]
    assert st == ShapeTuple([1, 2, 3])
    assert st != ShapeTuple([1, 2, 4]) and st != ShapeTuple([1, 2])
    assert st == [1, 2, 3]
    with pytest.raises(IndexError):
        st[3]
    assert _ffi_api.GetShapeTupleSize(st) == 3 and _ffi_api.GetShapeTupleElem(st, 1) == 2


def test_shape_tuple_edge_values():
    assert len(ShapeTuple([])) == 0 and list(ShapeTuple([])) == []
    big = ShapeTuple([2**40, -5, 0, 2**63 - 1])
    assert list(big) == [2**40, -5, 0, 2**63 - 1]
    long = ShapeTuple(list(range(100)))
    assert len(long) == 100 and long[99] == 99


def test_containers_round_trip_through_runtime():
    tvm.register_func("tvmrt_pytest.ident", lambda x: x, override=True)
    try:
        f = tvm.get_global_func("tvmrt_pytest.ident")
        arr = tvm.runtime.convert(["a", "b"])
        assert f(arr).same_as(arr)
        m = tvm.runtime.convert({"k": "v"})
        assert f(m).same_as(m)
        st = ShapeTuple([9, 8])
        r = f(st)
        assert isinstance(r, ShapeTuple) and list(r) == [9, 8]
        s = f(String("str"))
        assert isinstance(s, String) and s == "str"
        assert [str(x) for x in f(["p", "q"])] == ["p", "q"]  # python list converted on the way
        assert dict(f({"k": "v"}).items()) == {"k": "v"}
    finally:
        tvm._ffi.registry.remove_global_func("tvmrt_pytest.ident")
