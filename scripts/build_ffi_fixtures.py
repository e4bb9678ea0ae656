#!/usr/bin/env python3
"""Builds the tvm-ffi fixtures: libraries compiled by TVM v0.27 (PyPI apache-tvm, the tvm-ffi
ABI), with their inputs and the outputs TVM 0.27's own runtime computes.

    $TVMRT_FFI_PYTHON scripts/build_ffi_fixtures.py [--out DIR] [--force]

Run with the Python of the venv scripts/setup.sh makes for it ($TVMRT_CACHE/venv-ffi). DIR
defaults to $TVMRT_CACHE/ffi_fixtures. DIR/stamp holds this script's SHA-256; a run whose hash
matches does nothing. Fixtures (NAME.so + NAME.npz; manifest.json lists functions and npz keys):

  add        TE kernel `add` with a symbolic extent (single-function library: __tvm_ffi_main)
  kernels    `par_ws`: parallel loop with a per-task buffer from TVMBackendAllocWorkspace;
             `callpk`: calls the packed function `tvmrt_test.ffi_scale(a, b, n, scale)`
             (b[i] = a[i] * scale over float32 pointers), which the host registers
  mlp        Relax: matmul -> relu -> matmul, static shapes, weights as inputs
  mlp_dyn    the same with a dynamic batch dimension (run at batch 5 and 2)
  const      Relax with a tensor constant in the executable

Every array is also written raw (NAME.KEY.bin, little-endian, C order) for the C test.
"""
import argparse
import ctypes
import hashlib
import json
import os
import sys

import numpy as np

HERE = os.path.abspath(__file__)


def script_hash():
    with open(HERE, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main():
    ap = argparse.ArgumentParser()
    cache = os.environ.get("TVMRT_CACHE", os.path.expanduser("~/.cache/tvm-runtime-rs"))
    ap.add_argument("--out", default=os.path.join(cache, "ffi_fixtures"))
    ap.add_argument("--force", action="store_true")
    a = ap.parse_args()
    out = a.out
    os.makedirs(out, exist_ok=True)
    stamp = os.path.join(out, "stamp")
    digest = script_hash()
    if not a.force and os.path.exists(stamp) and open(stamp).read().strip() == digest:
        print(f"ffi fixtures: up to date in {out}")
        return
    if os.path.exists(stamp):
        os.remove(stamp)
    manifest = build(out)
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    with open(stamp, "w") as f:
        f.write(digest + "\n")
    print(f"ffi fixtures: {len(manifest)} built in {out} with TVM {tvm_version()}")


def tvm_version():
    import tvm
    return tvm.__version__


def build(out):
    import tvm
    from tvm import relax, te
    from tvm.script import ir as I
    from tvm.script import relax as R
    from tvm.script import tirx as T

    target = tvm.target.Target({"kind": "llvm", "mtriple": "x86_64-linux-gnu"})
    dev = tvm.cpu()
    rng = np.random.default_rng(20261123)
    manifest = {}

    def save(name, lib, calls, arrays):
        so = os.path.join(out, name + ".so")
        lib.export_library(so)
        np.savez(os.path.join(out, name + ".npz"), **arrays)
        for key, value in arrays.items():  # raw little-endian copies for the C test
            np.ascontiguousarray(value).tofile(os.path.join(out, f"{name}.{key}.bin"))
        manifest[name] = {"file": name + ".so", "data": name + ".npz", "calls": calls}

    # add: TE kernel with a symbolic extent.
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: A[i] + B[i], name="C")
    f = te.create_prim_func([A, B, C]).with_attr("global_symbol", "add")
    lib = tvm.compile(tvm.IRModule({"add": f}), target=target)
    x = rng.standard_normal(37).astype("float32")
    y = rng.standard_normal(37).astype("float32")
    z = tvm.runtime.tensor(np.zeros(37, "float32"), dev)
    lib["add"](tvm.runtime.tensor(x, dev), tvm.runtime.tensor(y, dev), z)
    save("add", lib, [{"function": "add", "args": ["x", "y"], "out_args": ["z"]}],
         {"x": x, "y": y, "z": z.numpy()})

    @I.ir_module
    class Kernels:
        @T.prim_func
        def par_ws(A: T.Buffer((64, 256), "float32"), B: T.Buffer((64,), "float32")):
            T.func_attr({"global_symbol": "par_ws", "tir.noalias": True})
            for i in T.parallel(64):
                tmp = T.decl_buffer((256,), "float32")
                for j in range(256):
                    tmp[j] = A[i, j] * T.float32(2)
                B[i] = T.float32(0)
                for j in range(256):
                    B[i] = B[i] + tmp[j]

        @T.prim_func
        def callpk(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
            T.func_attr({"global_symbol": "callpk"})
            T.evaluate(T.call_packed("tvmrt_test.ffi_scale", A.data, B.data, 8, T.float32(3)))

    def ffi_scale(a, b, n, scale):
        src = (ctypes.c_float * n).from_address(a.value if hasattr(a, "value") else int(a))
        dst = (ctypes.c_float * n).from_address(b.value if hasattr(b, "value") else int(b))
        for i in range(n):
            dst[i] = src[i] * scale

    tvm.register_global_func("tvmrt_test.ffi_scale", ffi_scale, override=True)
    lib = tvm.compile(Kernels, target=target)
    wa = rng.standard_normal((64, 256)).astype("float32")
    wb = tvm.runtime.tensor(np.zeros(64, "float32"), dev)
    lib["par_ws"](tvm.runtime.tensor(wa, dev), wb)
    ca = rng.standard_normal(8).astype("float32")
    cb = tvm.runtime.tensor(np.zeros(8, "float32"), dev)
    lib["callpk"](tvm.runtime.tensor(ca, dev), cb)
    save("kernels", lib,
         [{"function": "par_ws", "args": ["wa"], "out_args": ["wb"]},
          {"function": "callpk", "args": ["ca"], "out_args": ["cb"]}],
         {"wa": wa, "wb": wb.numpy(), "ca": ca, "cb": cb.numpy()})

    def relax_build(mod):
        mod = relax.transform.LegalizeOps()(mod)
        return tvm.compile(mod, target=target)

    def vm_run(ex, fname, *args):
        vm = relax.VirtualMachine(ex, dev)
        return vm[fname](*[tvm.runtime.tensor(a, dev) for a in args]).numpy()

    @I.ir_module
    class Mlp:
        @R.function
        def main(x: R.Tensor((4, 16), "float32"), w1: R.Tensor((16, 32), "float32"),
                 w2: R.Tensor((32, 8), "float32")) -> R.Tensor((4, 8), "float32"):
            with R.dataflow():
                h = R.nn.relu(R.matmul(x, w1))
                y = R.matmul(h, w2)
                R.output(y)
            return y

    ex = relax_build(Mlp)
    mx = rng.standard_normal((4, 16)).astype("float32")
    w1 = rng.standard_normal((16, 32)).astype("float32")
    w2 = rng.standard_normal((32, 8)).astype("float32")
    save("mlp", ex, [{"function": "main", "args": ["x", "w1", "w2"], "result": "y"}],
         {"x": mx, "w1": w1, "w2": w2, "y": vm_run(ex, "main", mx, w1, w2)})

    @I.ir_module
    class MlpDyn:
        @R.function
        def main(x: R.Tensor(("b", 16), "float32"), w1: R.Tensor((16, 32), "float32"),
                 w2: R.Tensor((32, 8), "float32")) -> R.Tensor(("b", 8), "float32"):
            with R.dataflow():
                h = R.nn.relu(R.matmul(x, w1))
                y = R.matmul(h, w2)
                R.output(y)
            return y

    ex = relax_build(MlpDyn)
    x5 = rng.standard_normal((5, 16)).astype("float32")
    x2 = rng.standard_normal((2, 16)).astype("float32")
    save("mlp_dyn", ex,
         [{"function": "main", "args": ["x5", "w1", "w2"], "result": "y5"},
          {"function": "main", "args": ["x2", "w1", "w2"], "result": "y2"}],
         {"x5": x5, "x2": x2, "w1": w1, "w2": w2, "y5": vm_run(ex, "main", x5, w1, w2),
          "y2": vm_run(ex, "main", x2, w1, w2)})

    cw = rng.standard_normal((16, 8)).astype("float32")
    @I.ir_module
    class Const:
        @R.function
        def main(x: R.Tensor((3, 16), "float32")) -> R.Tensor((3, 8), "float32"):
            with R.dataflow():
                mm = R.matmul(x, R.const(cw))
                y = R.add(mm, R.const(0.5, "float32"))
                R.output(y)
            return y

    ex = relax_build(Const)
    cx = rng.standard_normal((3, 16)).astype("float32")
    save("const", ex, [{"function": "main", "args": ["x"], "result": "y"}],
         {"x": cx, "y": vm_run(ex, "main", cx)})
    return manifest


if __name__ == "__main__":
    sys.exit(main())
