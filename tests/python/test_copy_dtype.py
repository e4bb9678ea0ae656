"""Copies between arrays of different data types (issue 30, part 5): the reference's
TVMArrayCopyFromTo copies whenever the byte sizes match, reinterpreting the bytes; ours refuses
with an error naming both types (a documented difference)."""

import numpy as np
import pytest
import tvm
from tvm.contrib import graph_executor

import tvmrt_helpers as H


def test_copyto_between_dtypes():
    a = tvm.nd.array(np.arange(4, dtype="int32"))
    b = tvm.nd.empty((4,), "float32")
    if H.IS_OURS:
        with pytest.raises(Exception, match="data types differ"):
            a.copyto(b)
    else:
        a.copyto(b)
        assert b.numpy().view("int32").tolist() == [0, 1, 2, 3]
    # Same type: copies on both.
    c = tvm.nd.empty((4,), "int32")
    a.copyto(c)
    assert c.numpy().tolist() == [0, 1, 2, 3]


def test_set_input_with_an_ndarray_of_another_dtype():
    _, lib, expected = H.fixture_entry("mlp")
    gm = graph_executor.GraphModule(tvm.runtime.load_module(lib)["default"](tvm.cpu()))
    data = expected["data"]
    wrong = tvm.nd.array(np.zeros(data.shape, dtype="int32"))
    if H.IS_OURS:
        with pytest.raises(Exception, match="data types differ"):
            gm.set_input("data", wrong)
    else:
        gm.set_input("data", wrong)  # silently reinterpreted by the reference
    # numpy input of another dtype is converted by TVM's Python (copyfrom) on both.
    gm.set_input("data", data.astype("float64"))
    gm.run()
    np.testing.assert_allclose(gm.get_output(0).numpy(), expected["output_0"], rtol=1e-5,
                               atol=1e-6)
