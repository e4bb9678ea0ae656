"""tvm.nd arrays: dtypes, numpy round trips, empty, copyto, views, shapes (0-d, zero-size)."""

import gc

import numpy as np
import pytest

import tvm
import tvmrt_helpers as H

INT_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
FLOAT_DTYPES = ["float16", "float32", "float64"]
ALL_DTYPES = INT_DTYPES + FLOAT_DTYPES + ["bool"]


def sample(dtype, shape=(3, 5)):
    """Values that exercise the whole range of the type (sign, high bits, fractions)."""
    n = int(np.prod(shape))
    if dtype == "bool":
        return (np.arange(n) % 3 == 0).reshape(shape)
    dt = np.dtype(dtype)
    if dt.kind == "f":
        v = (np.arange(n) - n / 2) * 0.37
        v[0] = np.finfo(dt).max
        v[-1] = np.finfo(dt).tiny
        return v.astype(dt).reshape(shape)
    info = np.iinfo(dt)
    lo, hi = int(info.min), int(info.max)
    v = [lo + (hi - lo) * i // (n - 1) for i in range(n)]
    return np.array(v, dtype=dt).reshape(shape)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_numpy_round_trip(dtype):
    x = sample(dtype)
    a = tvm.nd.array(x)
    assert a.dtype == dtype
    assert a.shape == x.shape
    assert a.device == tvm.cpu(0)
    y = a.numpy()
    assert y.dtype == x.dtype
    np.testing.assert_array_equal(y, x)
    # the array holds a copy: changing the source does not change it
    x.flat[1] = x.flat[2]
    np.testing.assert_array_equal(a.numpy().flat[1], y.flat[1])


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_empty_copyfrom_copyto(dtype):
    x = sample(dtype, (4, 2, 3))
    a = tvm.nd.empty(x.shape, dtype)
    assert (a.shape, a.dtype) == (x.shape, dtype)
    a.copyfrom(x)
    b = tvm.nd.empty(x.shape, dtype)
    r = a.copyto(b)
    assert r.same_as(b)
    np.testing.assert_array_equal(b.numpy(), x)
    c = a.copyto(tvm.cpu(0))
    assert not c.same_as(a)
    np.testing.assert_array_equal(c.numpy(), x)
    # deep copy: writing the copy leaves the source alone
    c.copyfrom(np.zeros_like(x))
    np.testing.assert_array_equal(a.numpy(), x)


def test_bfloat16():
    bits = np.array([0x3F80, 0x4000, 0xC040, 0x7F80, 0x0000, 0x8000], dtype="uint16")
    a = tvm.nd.empty((6,), "bfloat16")
    assert a.dtype == "bfloat16"
    a.copyfrom(bits)
    # numpy() returns the raw 16-bit patterns for bfloat16
    np.testing.assert_array_equal(a.numpy(), bits)
    assert a.handle.contents.dtype.type_code == 4 and a.handle.contents.dtype.bits == 16
    b = a.copyto(tvm.cpu())
    assert b.dtype == "bfloat16"
    np.testing.assert_array_equal(b.numpy(), bits)
    # as float32: the top half of 1.0, 2.0, -3.0, inf, 0, -0
    f = (b.numpy().astype(np.uint32) << 16).view(np.float32)
    np.testing.assert_array_equal(f, np.array([1.0, 2.0, -3.0, np.inf, 0.0, -0.0], np.float32))


# float8 (type codes 6/7): the runtime parses TVM 0.16's names (e4m3_float8, e5m2_float8)
# and v0.20's (float8_e4m3fn, float8_e5m2); TVM 0.16's Python prints the dtype itself.


@pytest.mark.parametrize(
    "name, printed, fields",
    [
        pytest.param("int4", "int4", (0, 4, 1), id="int4"),
        pytest.param("uint1", "bool", (1, 1, 1), id="uint1"),
        pytest.param("bool", "bool", (1, 1, 1), id="bool"),
        pytest.param("int", "int32", (0, 32, 1), id="int"),
        pytest.param("float", "float32", (2, 32, 1), id="float"),
        pytest.param("uint16x2", "uint16x2", (1, 16, 2), id="uint16x2"),
        pytest.param("float16x8", "float16x8", (2, 16, 8), id="float16x8"),
        pytest.param("bfloat16x4", "bfloat16x4", (4, 16, 4), id="bfloat16x4"),
        pytest.param("int32x1", "int32", (0, 32, 1), id="int32x1"),
        pytest.param("handle", "handle64", (3, 64, 1), id="handle"),
        pytest.param("handle64", "handle64", (3, 64, 1), id="handle64"),
        pytest.param("e4m3_float8", "e4m3_float8", (6, 8, 1), id="e4m3_float8"),
        pytest.param("e5m2_float8", "e5m2_float8", (7, 8, 1), id="e5m2_float8"),
    ],
)
def test_dtype_strings(name, printed, fields):
    # TVM's Python passes the dtype to runtime.TVMArrayAllocWithScope as a string
    a = tvm.nd.empty((2,), name)
    d = a.handle.contents.dtype
    assert a.dtype == printed
    assert (d.type_code, d.bits, d.lanes) == fields


def test_vector_dtype_lanes():
    a = tvm.nd.empty((3,), "float32x4")
    assert a.dtype == "float32x4" and a.shape == (3,)
    x = np.arange(12, dtype="float32").reshape(3, 4)
    a.copyfrom(x)
    np.testing.assert_array_equal(a.numpy(), x)


def test_zero_dim():
    x = np.array(2.5, dtype="float64")
    a = tvm.nd.array(x)
    assert a.shape == ()
    assert a.handle.contents.ndim == 0
    y = a.numpy()
    assert y.shape == () and y == 2.5
    e = tvm.nd.empty((), "int32")
    e.copyfrom(np.array(-7, dtype="int32"))
    assert e.shape == () and int(e.numpy()) == -7
    assert a.copyto(tvm.cpu()).numpy() == 2.5


@pytest.mark.parametrize("shape", [(0,), (0, 3), (4, 0, 2)])
def test_zero_size(shape):
    x = np.zeros(shape, dtype="float32")
    a = tvm.nd.array(x)
    assert a.shape == shape
    y = a.numpy()
    assert y.shape == shape and y.size == 0
    e = tvm.nd.empty(shape, "int16")
    assert e.shape == shape and e.numpy().shape == shape
    c = a.copyto(tvm.nd.empty(shape, "float32"))
    assert c.shape == shape


def test_empty_defaults_and_shape_tuple():
    a = tvm.nd.empty((2, 3))
    assert a.dtype == "float32" and a.device == tvm.cpu(0)
    b = tvm.nd.empty(tvm.runtime.ShapeTuple([5, 1]), "int64", tvm.cpu(0))
    assert b.shape == (5, 1) and b.dtype == "int64"
    # data is 64-byte aligned, as TVM's allocator guarantees
    assert H.data_ptr(a) % 64 == 0 and H.data_ptr(b) % 64 == 0


def test_array_of_noncontiguous_numpy():
    base = np.arange(48, dtype="int32").reshape(6, 8)
    for x in (base[:, ::2], base.T, base[::-1, 1:7:3], np.asfortranarray(base)):
        assert not x.flags["C_CONTIGUOUS"] or x is base
        a = tvm.nd.array(x)
        assert a.shape == x.shape
        np.testing.assert_array_equal(a.numpy(), x)


def test_array_of_python_lists_and_ndarray():
    a = tvm.nd.array([[1, 2], [3, 4]])
    np.testing.assert_array_equal(a.numpy(), np.array([[1, 2], [3, 4]]))
    b = tvm.nd.array(a)  # copies an NDArray
    assert not b.same_as(a)
    np.testing.assert_array_equal(b.numpy(), a.numpy())


def test_copyto_same_size_other_shape():
    # the reference only checks the byte size on copies between arrays
    a = tvm.nd.array(np.arange(6, dtype="float64"))
    b = a.copyto(tvm.nd.empty((2, 3), "float64"))
    np.testing.assert_array_equal(b.numpy(), np.arange(6, dtype="float64").reshape(2, 3))


def test_copyto_size_mismatch_raises():
    a = tvm.nd.array(np.arange(6, dtype="float64"))
    with pytest.raises(Exception) as ei:
        a.copyto(tvm.nd.empty((6,), "float32"))
    assert "48" in str(ei.value) and "24" in str(ei.value)


def test_copyfrom_shape_mismatch_raises():
    a = tvm.nd.empty((2, 3))
    with pytest.raises(ValueError, match="shape"):
        a.copyfrom(np.zeros((3, 2), "float32"))


def test_setitem_and_identity():
    a = tvm.nd.empty((2, 2), "float32")
    a[:] = np.full((2, 2), 3.0, "float32")
    np.testing.assert_array_equal(a.numpy(), np.full((2, 2), 3.0))
    b = tvm.nd.array(np.ones((2, 2), "float32"))
    a[:] = b
    np.testing.assert_array_equal(a.numpy(), np.ones((2, 2)))
    assert a == a and a != b and a.same_as(a) and not a.same_as(b)


def test_create_view_shares_memory():
    a = tvm.nd.array(np.arange(12, dtype="float32"))
    v = a._create_view((3, 4))
    assert v.shape == (3, 4) and v.dtype == "float32"
    np.testing.assert_array_equal(v.numpy(), np.arange(12, dtype="float32").reshape(3, 4))
    assert H.data_ptr(v) == H.data_ptr(a)
    v.copyfrom(np.full((3, 4), 9.0, "float32"))
    np.testing.assert_array_equal(a.numpy(), np.full(12, 9.0, "float32"))
    # a smaller view, a 0-d view, and a view given as ShapeTuple
    s = a._create_view((2, 3))
    assert s.shape == (2, 3) and s.numpy().sum() == 54.0
    z = a._create_view(())
    assert z.shape == () and z.numpy() == 9.0
    t = a._create_view(tvm.runtime.ShapeTuple([6, 2]))
    assert t.shape == (6, 2)


def test_view_keeps_base_alive():
    a = tvm.nd.array(np.arange(8, dtype="int64"))
    v = a._create_view((2, 4))
    del a
    gc.collect()
    junk = [tvm.nd.array(np.full(8, -1, "int64")) for _ in range(8)]  # reuse freed memory
    np.testing.assert_array_equal(v.numpy(), np.arange(8).reshape(2, 4))
    del junk


def test_view_larger_than_base_raises():
    a = tvm.nd.array(np.arange(12, dtype="float32"))
    with pytest.raises(Exception) as ei:
        a._create_view((4, 4))
    assert "64" in str(ei.value) and "48" in str(ei.value)


def test_memory_scope():
    a = tvm.nd.empty((3,), "float32", tvm.cpu(), "global")
    assert a.shape == (3,)
    b = tvm.nd.array(np.arange(3, dtype="float32")).copyto(tvm.cpu(), "global")
    np.testing.assert_array_equal(b.numpy(), [0, 1, 2])
    with pytest.raises(Exception) as ei:
        tvm.nd.empty((3,), "float32", tvm.cpu(), "global.texture")
    assert "global.texture" in str(ei.value)


def test_other_cpu_device_id():
    a = tvm.nd.array(np.arange(3), tvm.cpu(1))
    assert a.device == tvm.cpu(1) and a.__dlpack_device__() == (1, 1)
    b = a.copyto(tvm.cpu(0))
    assert b.device == tvm.cpu(0)
    np.testing.assert_array_equal(b.numpy(), [0, 1, 2])


def test_large_array():
    n = 16 * 1024 * 1024
    a = tvm.nd.empty((n,), "float32")
    x = np.ones(n, "float32")
    x[-1] = 5
    a.copyfrom(x)
    assert a.numpy()[-1] == 5 and H.data_ptr(a) % 64 == 0


def test_many_arrays_free():
    # allocation/free cycle through the runtime (each array is freed by Python's refcount)
    for i in range(200):
        a = tvm.nd.empty((256,), "float64")
        a.copyfrom(np.full(256, i, "float64"))
        assert a.numpy()[255] == i
