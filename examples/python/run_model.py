"""TVM's own Python package, in runtime-only mode, on tvm-runtime-rs.

Run with the environment TVM uses to pick a runtime library:
    TVM_LIBRARY_PATH=<dir with our libtvm_runtime.so> TVM_USE_RUNTIME_LIB=1 TVM_FFI=ctypes \
        python run_model.py ADD_LIBRARY.so [MODEL.so INPUT_NAME]
"""
import sys

import numpy as np
import tvm
from tvm.contrib import graph_executor


def main():
    lib_path = sys.argv[1]
    print("runtime library:", tvm._ffi.base._LIB._name)
    mod = tvm.runtime.load_module(lib_path)
    n = 1024
    a = tvm.nd.array(np.arange(n, dtype="float32"))
    b = tvm.nd.array(np.full(n, 0.25, dtype="float32"))
    c = tvm.nd.empty((n,), "float32")
    mod["myadd"](a, b, c)
    np.testing.assert_allclose(c.numpy(), a.numpy() + b.numpy())
    print("python: myadd correct")

    @tvm.register_func("example.py_square", override=True)
    def square(x):
        return x * x

    assert tvm.get_global_func("example.py_square")(7) == 49
    print("python: a Python function called through the runtime's registry")

    if len(sys.argv) > 3:
        lib = tvm.runtime.load_module(sys.argv[2])
        gmod = graph_executor.GraphModule(lib["default"](tvm.cpu()))
        shape = gmod.get_input(gmod.get_input_index(sys.argv[3])).shape
        x = np.sin(np.arange(np.prod(shape)) * 0.1).astype("float32").reshape(shape)
        gmod.set_input(sys.argv[3], x)
        gmod.run()
        out = gmod.get_output(0).numpy()
        print("python: model output shape", out.shape, "argmax", int(out.argmax()))


if __name__ == "__main__":
    main()
