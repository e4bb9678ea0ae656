"""Builds the test fixtures with the reference TVM compiler (hhb-tvm 3.2.3, TVM 0.16) into a
cache outside the source tree, and checks each one on the reference runtime against numpy.

    python scripts/build_fixtures.py [--out DIR] [--force]

Default DIR: $TVMRT_CACHE/fixtures (~/.cache/tvm-runtime-rs/fixtures). The build is skipped
when DIR/stamp holds this script's hash. manifest.json lists every fixture, its functions and
arguments; NAME.npz holds inputs and numpy-computed expected outputs.
"""
import argparse
import hashlib
import json
import os
import sys

import numpy as np

TARGET = "llvm -mtriple=x86_64-linux-gnu"


def main():
    cache = os.environ.get("TVMRT_CACHE", os.path.expanduser("~/.cache/tvm-runtime-rs"))
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(cache, "fixtures"))
    ap.add_argument("--force", action="store_true")
    args = ap.parse_args()
    out = args.out
    os.makedirs(out, exist_ok=True)
    digest = hashlib.sha256(open(__file__, "rb").read()).hexdigest()
    stamp = os.path.join(out, "stamp")
    if not args.force and os.path.exists(stamp) and open(stamp).read() == digest:
        print(f"fixtures: up to date in {out}")
        return
    import tvm
    from tvm import te, relay, tir
    from tvm.relay.backend import Runtime

    tgt = tvm.target.Target(TARGET)
    manifest = {}
    rng = np.random.default_rng(42)

    def save(name, lib, functions, arrays):
        lib.export_library(os.path.join(out, name + ".so"))
        np.savez(os.path.join(out, name + ".npz"), **arrays)
        manifest[name] = {"file": name + ".so", "expected": name + ".npz", "functions": functions}

    # Element-wise add, static shape (n = 1024) and the n = 1 call-overhead variant.
    for name, n in [("add_static", 1024), ("add_one", 1)]:
        A = te.placeholder((n,), name="A")
        B = te.placeholder((n,), name="B")
        C = te.compute((n,), lambda i: A[i] + B[i], name="C")
        lib = tvm.build(te.create_schedule(C.op), [A, B, C], tgt, name="myadd")
        a = rng.standard_normal(n).astype("float32")
        b = rng.standard_normal(n).astype("float32")
        save(name, lib, {"myadd": "A, B, C: float32[%d]; C = A + B" % n},
             {"A": a, "B": b, "C": a + b})

    # Dynamic shape, several dtypes, one module with several functions.
    funcs = []
    dtypes = ["float32", "float64", "int32", "int8", "uint8", "float16"]
    arrays = {}
    for dt in dtypes:
        n = te.var("n")
        A = te.placeholder((n,), name="A", dtype=dt)
        B = te.placeholder((n,), name="B", dtype=dt)
        C = te.compute((n,), lambda i: A[i] + B[i], name="C")
        funcs.append(tvm.lower(te.create_schedule(C.op), [A, B, C], name="add_" + dt))
        k = 37
        if dt.startswith("float"):
            a = rng.standard_normal(k).astype(dt)
            b = rng.standard_normal(k).astype(dt)
        else:
            a = rng.integers(0, 50, k).astype(dt)
            b = rng.integers(0, 50, k).astype(dt)
        arrays.update({f"{dt}_A": a, f"{dt}_B": b, f"{dt}_C": (a + b).astype(dt)})
        if dt == "float16":  # raw bits too, for readers without a half type
            arrays.update({f"{dt}_{k}_bits": arrays[f"{dt}_{k}"].view("uint16") for k in "ABC"})
    mod = funcs[0]
    for f in funcs[1:]:
        mod.update(f)
    lib = tvm.build(mod, target=tgt)
    save("add_dynamic", lib, {"add_" + dt: f"A, B, C: {dt}[n]; C = A + B" for dt in dtypes}, arrays)

    # A parallel loop (TVMBackendParallelLaunch).
    N = 1 << 16
    A = te.placeholder((N,), name="A")
    B = te.compute((N,), lambda i: A[i] * 2.0 + 1.0, name="B")
    s = te.create_schedule(B.op)
    xo, _ = s[B].split(B.op.axis[0], factor=1024)
    s[B].parallel(xo)
    lib = tvm.build(s, [A, B], tgt, name="scale_shift")
    a = rng.standard_normal(N).astype("float32")
    save("parallel", lib, {"scale_shift": "A, B: float32[65536]; B = 2A + 1 (parallel)"},
         {"A": a, "B": a * 2 + 1})

    # A kernel needing workspace: matmul through an intermediate buffer.
    M = 64
    X = te.placeholder((M, M), name="X")
    Y = te.placeholder((M, M), name="Y")
    k = te.reduce_axis((0, M), name="k")
    T = te.compute((M, M), lambda i, j: te.sum(X[i, k] * Y[k, j], axis=k), name="T")
    Z = te.compute((M, M), lambda i, j: T[i, j] + 1.0, name="Z")
    s = te.create_schedule(Z.op)
    lib = tvm.build(s, [X, Y, Z], tgt, name="matmul_plus_one")
    uses_ws = "TVMBackendAllocWorkspace" in lib.get_source("ll")
    x = rng.standard_normal((M, M)).astype("float32")
    y = rng.standard_normal((M, M)).astype("float32")
    save("workspace", lib, {"matmul_plus_one": "X, Y, Z: float32[64,64]; Z = X@Y + 1"},
         {"X": x, "Y": y, "Z": x @ y + 1, "uses_workspace": np.array(uses_ws)})

    # A kernel calling back into a packed function the test registers.
    n = 16
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    ib_out = te.extern(
        (n,), [A],
        lambda ins, outs: tir.call_packed("tvmrt_test.add_scalar", ins[0], outs[0], 3.0),
        name="B", dtype="float32")
    s = te.create_schedule(ib_out.op)
    lib = tvm.build(s, [A, ib_out], tgt, name="call_packed")
    a = rng.standard_normal(n).astype("float32")
    save("packed_call", lib,
         {"call_packed": "A, B: float32[16]; calls tvmrt_test.add_scalar(A, B, 3.0), "
                         "which the test registers to compute B = A + 3.0"},
         {"A": a, "B": a + 3.0})

    # System library object (linked statically into an executable).
    n = 1024
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: A[i] + B[i], name="C")
    lib = tvm.build(te.create_schedule(C.op), [A, B, C], tgt, name="myadd",
                    runtime=Runtime("cpp", {"system-lib": True}))
    lib.save(os.path.join(out, "syslib_add.o"))
    manifest["syslib_add"] = {"file": "syslib_add.o", "functions": {"myadd": "as add_static"}}

    # Graph executor models (expected outputs from the reference runtime).
    from tvm.contrib import graph_executor

    def model(name, func, params, inputs, link_params=False):
        mod = tvm.IRModule.from_expr(func)
        kwargs = {}
        if link_params:
            from tvm.relay.backend import Executor
            kwargs["executor"] = Executor("graph", {"link-params": True})
        with tvm.transform.PassContext(opt_level=3):
            lib = relay.build(mod, target=tgt, params=params, **kwargs)
        path = os.path.join(out, name + ".so")
        lib.export_library(path)
        g = graph_executor.GraphModule(tvm.runtime.load_module(path)["default"](tvm.cpu()))
        for k, v in inputs.items():
            g.set_input(k, v)
        g.run()
        arrays = dict(inputs)
        for i in range(g.get_num_outputs()):
            arrays[f"output_{i}"] = g.get_output(i).numpy()
        np.savez(os.path.join(out, name + ".npz"), **arrays)
        manifest[name] = {"file": name + ".so", "expected": name + ".npz", "graph": True,
                          "inputs": {k: [list(v.shape), str(v.dtype)] for k, v in inputs.items()}}
        return lib

    def mlp():
        x = relay.var("data", shape=(1, 64), dtype="float32")
        w1, b1 = relay.var("w1", shape=(32, 64)), relay.var("b1", shape=(32,))
        w2, b2 = relay.var("w2", shape=(10, 32)), relay.var("b2", shape=(10,))
        h = relay.nn.relu(relay.nn.bias_add(relay.nn.dense(x, w1), b1))
        y = relay.nn.softmax(relay.nn.bias_add(relay.nn.dense(h, w2), b2))
        r = np.random.default_rng(0)
        params = {k: tvm.nd.array(r.standard_normal(s).astype("float32"))
                  for k, s in [("w1", (32, 64)), ("b1", (32,)), ("w2", (10, 32)), ("b2", (10,))]}
        return relay.Function([x, w1, b1, w2, b2], y), params

    data = {"data": np.sin(np.arange(64) * 0.1).astype("float32").reshape(1, 64)}
    f, params = mlp()
    lib = model("mlp", f, params, data)
    tvm.runtime.save_param_dict  # noqa: B018 (present in 0.16)
    with open(os.path.join(out, "mlp.json"), "w") as fh:
        fh.write(lib.get_graph_json())
    with open(os.path.join(out, "mlp.params"), "wb") as fh:
        fh.write(tvm.runtime.save_param_dict(lib.get_params()))
    f, params = mlp()
    model("mlp_linked", f, params, data, link_params=True)

    x = relay.var("data", shape=(1, 3, 32, 32), dtype="float32")
    w = relay.var("w", shape=(8, 3, 3, 3))
    b = relay.var("b", shape=(8,))
    wd = relay.var("wd", shape=(10, 8 * 16 * 16))
    h = relay.nn.relu(relay.nn.bias_add(relay.nn.conv2d(x, w, padding=(1, 1), channels=8, kernel_size=(3, 3)), b))
    h = relay.nn.max_pool2d(h, pool_size=(2, 2), strides=(2, 2))
    y = relay.nn.dense(relay.nn.batch_flatten(h), wd)
    r = np.random.default_rng(1)
    params = {k: tvm.nd.array(r.standard_normal(s).astype("float32") * 0.1)
              for k, s in [("w", (8, 3, 3, 3)), ("b", (8,)), ("wd", (10, 2048))]}
    model("conv", relay.Function([x, w, b, wd], y), params,
          {"data": r.standard_normal((1, 3, 32, 32)).astype("float32")})

    # Check the kernels on the reference runtime against numpy.
    def check(name, fname, keys, shape_args=None):
        m = tvm.runtime.load_module(os.path.join(out, name + ".so"))
        e = np.load(os.path.join(out, name + ".npz"))
        args = [tvm.nd.array(e[k]) for k in keys[:-1]] + [tvm.nd.empty(e[keys[-1]].shape, e[keys[-1]].dtype)]
        m[fname](*args)
        np.testing.assert_allclose(args[-1].numpy(), e[keys[-1]], rtol=1e-4, atol=1e-4)

    check("add_static", "myadd", ["A", "B", "C"])
    check("add_one", "myadd", ["A", "B", "C"])
    for dt in dtypes:
        check("add_dynamic", "add_" + dt, [f"{dt}_A", f"{dt}_B", f"{dt}_C"])
    check("parallel", "scale_shift", ["A", "B"])
    check("workspace", "matmul_plus_one", ["X", "Y", "Z"])

    @tvm.register_func("tvmrt_test.add_scalar", override=True)
    def _add_scalar(a, b, c):
        b.copyfrom(a.numpy() + np.float32(c))

    check("packed_call", "call_packed", ["A", "B"])

    with open(os.path.join(out, "manifest.json"), "w") as fh:
        json.dump(manifest, fh, indent=1)
    with open(stamp, "w") as fh:
        fh.write(digest)
    print(f"fixtures: built {len(manifest)} fixtures in {out} (workspace kernel uses "
          f"TVMBackendAllocWorkspace: {uses_ws})")


if __name__ == "__main__":
    sys.exit(main())
