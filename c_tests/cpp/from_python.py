"""Calls C++ functions registered with TVM_REGISTER_GLOBAL (ext.cc) from TVM's Python package.

    python from_python.py LIBCPP_EXT.so

Runs on whichever runtime `import tvm` loads (TVM_LIBRARY_PATH / TVM_USE_RUNTIME_LIB).
"""
import ctypes
import sys

import numpy as np
import tvm

ctypes.CDLL(sys.argv[1], ctypes.RTLD_GLOBAL)

add = tvm.get_global_func("tvmrt_cpp_ext.add")
print("add:", add(40, 2))
assert add(40, 2) == 42

a = tvm.nd.array(np.arange(6, dtype="float32").reshape(2, 3))
n = tvm.get_global_func("tvmrt_cpp_ext.scale")(a, 0.5)
print("scale:", n, a.numpy().ravel().tolist())
assert n == 6 and a.numpy().ravel().tolist() == [0.0, 0.5, 1.0, 1.5, 2.0, 2.5]

greet = tvm.get_global_func("tvmrt_cpp_ext.greet")
print("greet:", greet("python"))
assert greet("python") == "hello, python"

print("sum_args:", tvm.get_global_func("tvmrt_cpp_ext.sum_args")(1, 2.5, 3))

call_back = tvm.get_global_func("tvmrt_cpp_ext.call_back")
print("call_back:", call_back(lambda x: x + 1, 4))
assert call_back(lambda x: x + 1, 4) == 50

shape = tvm.get_global_func("tvmrt_cpp_ext.make_shape")(3, 4)
print("make_shape:", list(shape))
assert list(shape) == [3, 4]

try:
    tvm.get_global_func("tvmrt_cpp_ext.fail")("testing")
except tvm.TVMError as e:
    assert "failing on purpose: testing" in str(e), str(e)
    print("fail: raised TVMError with the C++ message")
else:
    raise AssertionError("tvmrt_cpp_ext.fail did not raise")

try:
    scale = tvm.get_global_func("tvmrt_cpp_ext.scale")
    scale(tvm.nd.array(np.zeros(3, dtype="int32")), 2.0)
except tvm.TVMError as e:
    assert "scale expects a float32 tensor" in str(e), str(e)
    print("scale on int32: raised TVMError with the C++ message")
else:
    raise AssertionError("scale on int32 did not raise")
print("from_python: ok")
