"""DLPack in and out: to_dlpack/from_dlpack, numpy's __dlpack__ both ways, ownership."""

import ctypes
import functools
import gc

import numpy as np
import pytest

import tvm
import tvmrt_helpers as H

DTYPES = [
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
]

HAS_NP_DLPACK = hasattr(np, "from_dlpack") and hasattr(np.ndarray, "__dlpack__")


def needs_np_dlpack(test):
    """Skips the test (through H.skip) when numpy has no DLPack support."""

    @functools.wraps(test)
    def run(*args, **kwargs):
        if not HAS_NP_DLPACK:
            H.skip("numpy without DLPack support")
        return test(*args, **kwargs)

    return run


@pytest.mark.parametrize("dtype", DTYPES + ["bool", "bfloat16"])
def test_tvm_round_trip_zero_copy(dtype):
    a = tvm.nd.empty((3, 4), dtype)
    if dtype == "bfloat16":
        x = np.arange(12, dtype="uint16").reshape(3, 4)
    else:
        x = (np.arange(12) % 5).astype(dtype).reshape(3, 4)
    a.copyfrom(x)
    cap = a.to_dlpack()
    b = tvm.nd.from_dlpack(cap)
    assert b.dtype == dtype and b.shape == (3, 4)
    assert H.data_ptr(b) == H.data_ptr(a)  # no copy
    np.testing.assert_array_equal(b.numpy(), x)
    # writes through one are seen through the other
    x2 = x[::-1].copy()
    b.copyfrom(x2)
    np.testing.assert_array_equal(a.numpy(), x2)


def test_capsule_consumed_once():
    a = tvm.nd.array(np.arange(4, dtype="float32"))
    cap = a.to_dlpack()
    tvm.nd.from_dlpack(cap)
    with pytest.raises(ValueError, match="consumed once"):
        tvm.nd.from_dlpack(cap)


def test_unconsumed_capsule_is_released():
    # An unconsumed capsule calls the DLPack deleter (TVMDLManagedTensorCallDeleter) when it
    # dies; the array must stay valid and the reference it held must be dropped.
    a = tvm.nd.array(np.arange(5, dtype="int32"))
    for _ in range(50):
        cap = a.to_dlpack()
        del cap
    gc.collect()
    np.testing.assert_array_equal(a.numpy(), np.arange(5))


def test_dlpack_keeps_source_alive():
    a = tvm.nd.array(np.arange(6, dtype="float64"))
    b = tvm.nd.from_dlpack(a.to_dlpack())
    del a
    gc.collect()
    junk = [tvm.nd.array(np.full(6, -1.0)) for _ in range(8)]
    np.testing.assert_array_equal(b.numpy(), np.arange(6, dtype="float64"))
    del junk


@pytest.mark.parametrize("shape", [(), (0,), (2, 0, 3), (7,), (2, 3, 4)])
def test_dlpack_shapes(shape):
    a = tvm.nd.empty(shape, "float32")
    x = np.arange(int(np.prod(shape)), dtype="float32").reshape(shape)
    a.copyfrom(x)
    b = tvm.nd.from_dlpack(a.to_dlpack())
    assert b.shape == shape
    np.testing.assert_array_equal(b.numpy(), x)


def test_from_dlpack_of_view():
    a = tvm.nd.array(np.arange(12, dtype="int16"))
    v = a._create_view((3, 4))
    b = tvm.nd.from_dlpack(v.to_dlpack())
    assert b.shape == (3, 4)
    np.testing.assert_array_equal(b.numpy(), np.arange(12, dtype="int16").reshape(3, 4))
    assert H.data_ptr(b) == H.data_ptr(a)


def test_dunder_dlpack():
    a = tvm.nd.array(np.arange(3, dtype="float32"))
    assert a.__dlpack_device__() == (1, 0)
    b = tvm.nd.from_dlpack(a)  # an object with __dlpack__
    assert H.data_ptr(b) == H.data_ptr(a)
    with pytest.raises(AttributeError):
        tvm.nd.from_dlpack(object())


@needs_np_dlpack
@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_into_tvm(dtype):
    x = H.aligned_numpy((4, 6), dtype, fill=(np.arange(24) % 7).reshape(4, 6))
    a = tvm.nd.from_dlpack(x)
    assert a.dtype == dtype and a.shape == (4, 6)
    assert H.data_ptr(a) == x.ctypes.data  # zero copy
    np.testing.assert_array_equal(a.numpy(), x)
    x[0, 0] = 5
    assert a.numpy()[0, 0] == 5


@needs_np_dlpack
def test_numpy_source_outlives_python_reference():
    x = H.aligned_numpy((16,), "float64", fill=np.arange(16))
    a = tvm.nd.from_dlpack(x)
    del x
    gc.collect()
    junk = [np.full(16, -1.0) for _ in range(16)]
    np.testing.assert_array_equal(a.numpy(), np.arange(16, dtype="float64"))
    del junk, a
    gc.collect()  # the DLPack deleter hands the numpy array back


@needs_np_dlpack
@pytest.mark.parametrize("dtype", DTYPES)  # numpy 1.26 cannot import bool through DLPack
def test_tvm_into_numpy(dtype):
    x = (np.arange(10) % 3).astype(dtype)
    a = tvm.nd.array(x)
    y = np.from_dlpack(a)
    assert y.dtype == x.dtype and y.shape == x.shape
    assert y.ctypes.data == H.data_ptr(a)  # zero copy
    np.testing.assert_array_equal(y, x)
    a.copyfrom(x[::-1].copy())
    np.testing.assert_array_equal(y, x[::-1])


@needs_np_dlpack
def test_tvm_into_numpy_outlives_array():
    a = tvm.nd.array(np.arange(8, dtype="int32").reshape(2, 4))
    y = np.from_dlpack(a)
    del a
    gc.collect()
    junk = [tvm.nd.array(np.full(8, -1, "int32")) for _ in range(8)]
    np.testing.assert_array_equal(y, np.arange(8).reshape(2, 4))
    del junk


@needs_np_dlpack
def test_numpy_0d_and_empty():
    z = H.aligned_numpy((), "float32", fill=3.5)
    a = tvm.nd.from_dlpack(z)
    assert a.shape == () and a.numpy() == 3.5
    e = H.aligned_numpy((0, 5), "int32")
    b = tvm.nd.from_dlpack(e)
    assert b.shape == (0, 5) and b.numpy().size == 0


@needs_np_dlpack
def test_numpy_unaligned_rejected():
    base = H.aligned_numpy((40,), "float32", fill=np.arange(40))
    x = base[1:17]  # 4 bytes past a 64-byte boundary
    with pytest.raises(Exception) as ei:
        tvm.nd.from_dlpack(x)
    assert "align" in str(ei.value).lower()


@needs_np_dlpack
def test_numpy_noncontiguous_rejected():
    base = H.aligned_numpy((32,), "float32", fill=np.arange(32))
    x = base[::2]  # aligned start, stride 2
    with pytest.raises(Exception) as ei:
        tvm.nd.from_dlpack(x)
    msg = str(ei.value).lower()
    assert "contiguous" in msg or "compact" in msg or "stride" in msg


def test_managed_tensor_deleter_via_c_api():
    # TVMArrayToDLPack + TVMDLManagedTensorCallDeleter directly (what the capsule destructor
    # does), checking the DLManagedTensor fields the producer fills.
    from tvm._ffi.base import _LIB, check_call
    from tvm._ffi.runtime_ctypes import TVMArray

    class DLManagedTensor(ctypes.Structure):
        _fields_ = [
            ("dl_tensor", TVMArray),
            ("manager_ctx", ctypes.c_void_p),
            ("deleter", ctypes.c_void_p),
        ]

    a = tvm.nd.array(np.arange(6, dtype="int64").reshape(2, 3))
    h = ctypes.c_void_p()
    check_call(_LIB.TVMArrayToDLPack(a.handle, ctypes.byref(h)))
    mt = ctypes.cast(h, ctypes.POINTER(DLManagedTensor)).contents
    t = mt.dl_tensor
    assert t.ndim == 2 and [t.shape[0], t.shape[1]] == [2, 3]
    assert (t.dtype.type_code, t.dtype.bits, t.dtype.lanes) == (0, 64, 1)
    assert (t.device.device_type, t.device.device_id) == (1, 0)
    assert t.data + t.byte_offset == H.data_ptr(a)
    assert mt.deleter
    _LIB.TVMDLManagedTensorCallDeleter(h)  # returns void
    np.testing.assert_array_equal(a.numpy(), np.arange(6).reshape(2, 3))
