"""The Python exception class of errors raised inside the runtime.

TVM's Python picks the class from the "Name: " prefix of the C error text (TVMGetLastError): the
reference's ICHECK failures come back as tvm.error.InternalError, other LOG(FATAL)s as TVMError
(both subclasses of RuntimeError), so code written against TVM catches tvm.TVMError. The other
test modules check that these errors happen and what they say; this one checks the class is the
reference's."""

import os

import numpy as np
import pytest

import tvm
from tvm._ffi.base import TVMError
from tvm.error import InternalError

import tvmrt_helpers as H

def _view_too_big():
    tvm.nd.array(np.arange(12, dtype="float32"))._create_view((4, 4))


def _copy_size_mismatch():
    tvm.nd.array(np.arange(6, dtype="float64")).copyto(tvm.nd.empty((6,), "float32"))


def _dlpack_unaligned():
    base = H.aligned_numpy((40,), "float32", fill=0)
    tvm.nd.from_dlpack(base[1:17])


def _dlpack_strided():
    base = H.aligned_numpy((32,), "float32", fill=0)
    tvm.nd.from_dlpack(base[::2])


def _negative_shape():
    tvm.nd.empty((-1, 3), "float32")


def _unsupported_scope():
    tvm.nd.empty((2,), "float32", tvm.cpu(), "global.texture")


def _register_twice():
    name = "tvmrt_pytest.errors.dup"
    tvm.register_func(name, lambda: 1, override=True)
    try:
        tvm.register_func(name, lambda: 2)
    finally:
        tvm._ffi.registry.remove_global_func(name)


def _cuda_attr():
    tvm.cuda(0).max_threads_per_block


def _cuda_alloc():
    tvm.nd.empty((4,), "float32", tvm.cuda(0))


def _load_missing_file():
    tvm.runtime._ffi_api.ModuleLoadFromFile("/nonexistent/tvmrt/missing.so", "")


def _load_garbage(tmp_path):
    p = tmp_path / "garbage.so"
    p.write_bytes(b"not an ELF file at all\n" * 8)
    tvm.runtime.load_module(str(p))


def _load_unknown_format(tmp_path):
    p = tmp_path / "data.xyz"
    p.write_bytes(b"x")
    tvm.runtime.load_module(str(p))


def _array_oob():
    tvm.runtime._ffi_api.ArrayGetItem(tvm.runtime.convert(["a", "b"]), 5)


def _map_missing_key():
    tvm.runtime.convert({"a": "b"})["nope"]


def _graph(name="mlp"):
    entry, path, e = H.fixture_entry(name)
    return tvm.runtime.load_module(path)


def _graph_output_oob():
    from tvm.contrib import graph_executor

    graph_executor.GraphModule(_graph()["default"](tvm.cpu())).get_output(5)


def _graph_on_cuda():
    _graph()["default"](tvm.cuda(0))


def _graph_bad_json():
    from tvm.contrib import graph_executor

    graph_executor.create("{not json", _graph(), tvm.cpu())


def _time_evaluator_missing():
    entry, path, e = H.fixture_entry("add_static")
    tvm.runtime.load_module(path).time_evaluator("no_such_function", tvm.cpu())()


def _time_evaluator_missing_preproc():
    entry, path, e = H.fixture_entry("add_static")
    tvm.runtime.load_module(path).time_evaluator("myadd", tvm.cpu(), f_preproc="no_such_f")()


def _no_entry_function():
    entry, path, e = H.fixture_entry("add_dynamic")
    tvm.runtime.load_module(path).entry_func


def _gpu_absent():
    if os.path.exists("/dev/nvidia0") or os.path.exists("/dev/nvidiactl"):
        H.skip("this machine has an NVIDIA GPU")


CASES = [
    # (id, trigger, the class the reference raises)
    ("view_larger_than_array", _view_too_big, InternalError),
    ("copy_size_mismatch", _copy_size_mismatch, InternalError),
    ("dlpack_unaligned", _dlpack_unaligned, InternalError),
    ("dlpack_strided", _dlpack_strided, InternalError),
    ("negative_shape", _negative_shape, TVMError),
    ("unsupported_memory_scope", _unsupported_scope, TVMError),
    ("register_twice", _register_twice, InternalError),
    ("absent_device_attribute", _cuda_attr, InternalError),
    ("absent_device_alloc", _cuda_alloc, InternalError),
    ("load_missing_file", _load_missing_file, InternalError),
    ("load_non_elf", _load_garbage, InternalError),
    ("load_unknown_format", _load_unknown_format, InternalError),
    ("array_index_out_of_range", _array_oob, InternalError),
    ("map_missing_key", _map_missing_key, InternalError),
    ("graph_output_out_of_range", _graph_output_oob, InternalError),
    ("graph_on_absent_device", _graph_on_cuda, InternalError),
    ("graph_bad_json", _graph_bad_json, TVMError),
    ("time_evaluator_missing_function", _time_evaluator_missing, TVMError),
    ("time_evaluator_missing_preproc", _time_evaluator_missing_preproc, InternalError),
    ("no_entry_function", _no_entry_function, InternalError),
]


@pytest.mark.parametrize("trigger, want", [pytest.param(fn, w, id=cid) for cid, fn, w in CASES])
def test_error_class_matches_reference(trigger, want, tmp_path):
    if trigger in (_cuda_attr, _cuda_alloc, _graph_on_cuda):
        _gpu_absent()
    with pytest.raises(Exception) as ei:
        if trigger.__code__.co_argcount:
            trigger(tmp_path)
        else:
            trigger()
    err = ei.value
    assert isinstance(err, TVMError), f"{type(err).__name__}: {err}"
    assert type(err) is want, f"{type(err).__name__}: {err}"
