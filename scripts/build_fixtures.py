#!/usr/bin/env python3
"""Builds the test fixtures with the reference TVM compiler (hhb-tvm 3.2.3 = TVM 0.16.dev0) and
checks every one of them on the reference runtime against its expected outputs.

    $TVMRT_PYTHON scripts/build_fixtures.py [--out DIR] [--models | --all] [--force]
    $TVMRT_PYTHON scripts/build_fixtures.py [--out DIR] --verify

DIR defaults to $TVMRT_CACHE/fixtures (~/.cache/tvm-runtime-rs/fixtures), outside the source
tree. DIR/stamp records this script's SHA-256 and the groups built ("core", and "models" with
--models); a run whose script hash and groups are already recorded does nothing, a run asking
for a missing group builds only that group. The stamp is written last, after the verification
passed, so an interrupted or failed build is redone by the next run.

  --models / --all  also build resnet18.so and mobilenet.so (about 20 s each, 47 and 17 MB),
                    and the same two models as Relax VM executables through
                    relay_translator.from_relay (relax_resnet18.so, relax_mobilenet.so), once
                    as from_relay leaves their kernels and once with each kernel's outer
                    loops run in parallel (relax_resnet18_par.so, relax_mobilenet_par.so)
  --force           rebuild the requested groups even when the stamp matches
  --verify          build nothing: check the fixtures listed in DIR/manifest.json on whatever
                    runtime `import tvm` loads in this process. A build runs this mode in a
                    subprocess on the reference runtime-only library ($TVMRT_REF_LIB, with
                    TVM_USE_RUNTIME_LIB=1) when it exists; pointing TVM_LIBRARY_PATH at another
                    libtvm_runtime.so checks the fixtures on that runtime instead.

Every library is written with export_library (a .so) except the system-lib object
(syslib_add.o). NAME.npz holds the inputs and the expected outputs: computed with numpy for the
kernels, produced by the reference graph executor for the relay models and by the reference
Relax VM for the relax_* executables (relax.build; also saved as NAME/KEY.npy, compared bit for
bit). manifest.json describes
every fixture: file, functions, argument names/dtypes/shapes, the calls that check it (npz keys
in argument order), tolerances and the TVM symbols the file defines or imports.
scripts/fixtures.md documents the fixtures and the calling conventions.
"""
import argparse
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

TRIPLE = "x86_64-linux-gnu"
# Explicit host triple: this fork's default LLVM triple is RISC-V. No -mcpu, so the fixtures
# run on any x86-64 machine (generic SSE2 code).
TARGET = "llvm -mtriple=" + TRIPLE
# The large models use the target the issue names (AVX2, as on any x86-64 machine since 2013).
MODEL_TARGET = TARGET + " -mcpu=core-avx2"
HERE = os.path.abspath(__file__)
GROUPS = ("core", "models")
# Kernel calls in the relax_chain fixture (the VM-overhead benchmark).
RELAX_CHAIN_CALLS = 100

# Toolchain symbols every shared library has; left out of the manifest's symbol lists.
_CRT_SYMBOLS = {
    "_ITM_deregisterTMCloneTable",
    "_ITM_registerTMCloneTable",
    "__gmon_start__",
    "__cxa_finalize",
    "_init",
    "_fini",
}


def script_hash():
    with open(HERE, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def log(msg):
    print(msg, flush=True)


# ---------------------------------------------------------------------------------------------
# Manifest helpers


def arg(name, dtype, shape, io="in", key=None):
    """One function argument: a DLTensor of `dtype` and `shape` ("n" for a symbolic extent);
    `key` is the npz member holding its data (inputs) or its expected value (outputs)."""
    return {"name": name, "kind": "DLTensor", "dtype": dtype, "shape": list(shape), "io": io,
            "key": key or name}


def call(function, args, outputs, rtol=0.0, atol=0.0, repeat=1):
    """A verification call: npz keys in argument order; `outputs` are the keys of the
    arguments the function writes (allocated empty, compared after the call)."""
    return {"function": function, "args": list(args), "outputs": list(outputs),
            "rtol": rtol, "atol": atol, "repeat": repeat}


def nm_symbols(path, dynamic=True):
    """{"defined": {name: nm type}, "undefined": [names]} of a library or object, or None
    when nm is missing."""
    nm = shutil.which("nm")
    if not nm:
        return None
    cmd = [nm, "--format=posix"] + (["-D"] if dynamic else []) + [path]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    defined, undefined = {}, []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2 or parts[0] in _CRT_SYMBOLS:
            continue
        name, kind = parts[0], parts[1]
        if kind in ("U", "w", "v"):
            undefined.append(name)
        else:
            defined[name] = kind
    return {"defined": dict(sorted(defined.items())), "undefined": sorted(undefined)}


def ir_runtime_calls(ll):
    """TVM runtime entry points an LLVM module reaches: through the function-pointer slots of a
    DSO (`@__TVMBackend...`, filled by the loader) or by direct calls (system lib)."""
    return sorted(set(re.findall(r"@_?_?(TVM(?:Backend|API|Func)\w+)", ll)))


def relax_sinfo(s):
    """A compact text form of a Relax struct info: float32[4, n], (a, b), shape[ndim=2]."""
    from tvm import relax, tir

    if isinstance(s, relax.TensorStructInfo):
        if isinstance(s.shape, relax.ShapeExpr):
            dims = (str(int(v)) if isinstance(v, tir.IntImm) else str(v) for v in s.shape.values)
            return f"{s.dtype}[{', '.join(dims)}]"
        return f"{s.dtype}[ndim={s.ndim}]"
    if isinstance(s, relax.TupleStructInfo):
        return "(" + ", ".join(relax_sinfo(f) for f in s.fields) + ")"
    if isinstance(s, relax.ShapeStructInfo):
        return f"shape[ndim={s.ndim}]"
    return type(s).__name__


def relax_param(p):
    """A Relax function parameter in the manifest's argument form ("n" for a symbolic
    extent), or its kind in words when it is not a tensor with a known shape."""
    from tvm import relax, tir

    s = p.struct_info
    if isinstance(s, relax.TensorStructInfo) and isinstance(s.shape, relax.ShapeExpr):
        dims = [int(v) if isinstance(v, tir.IntImm) else str(v) for v in s.shape.values]
        a = arg(p.name_hint, s.dtype, dims)
        del a["key"]  # each call names its own npz keys
        return a
    return {"name": p.name_hint, "kind": relax_sinfo(s), "io": "in"}


def relax_signature(fn):
    params = ", ".join(f"{p.name_hint}: {relax_sinfo(p.struct_info)}" for p in fn.params)
    return f"({params}) -> {relax_sinfo(fn.ret_struct_info)}"


# ---------------------------------------------------------------------------------------------
# Fixture builders (run in the compiler process)


class Builder:
    def __init__(self, out):
        import tvm

        self.tvm = tvm
        self.out = out
        self.tgt = tvm.target.Target(TARGET)
        self.manifest = {}
        self.rng = np.random.default_rng(42)
        self.notes = {}

    def path(self, name):
        return os.path.join(self.out, name)

    def export(self, name, lib, arrays, entry):
        so = name + ".so"
        lib.export_library(self.path(so))
        np.savez(self.path(name + ".npz"), **arrays)
        self.manifest[name] = {
            "kind": entry.pop("kind", "kernel"), "file": so, "expected": name + ".npz", **entry,
            "bytes": os.path.getsize(self.path(so)), "symbols": nm_symbols(self.path(so))}

    # -- kernels ---------------------------------------------------------------------------

    def add_static(self):
        from tvm import te

        tvm = self.tvm
        for name, n in [("add_static", 1024), ("add_one", 1)]:
            A = te.placeholder((n,), name="A")
            B = te.placeholder((n,), name="B")
            C = te.compute((n,), lambda i: A[i] + B[i], name="C")
            lib = tvm.build(te.create_schedule(C.op), [A, B, C], self.tgt, name="myadd")
            a = self.rng.standard_normal(n).astype("float32")
            b = self.rng.standard_normal(n).astype("float32")
            self.export(name, lib, {"A": a, "B": b, "C": a + b}, {
                "description": "TVM tutorial vector add, static shape n=%d%s" % (
                    n, " (call-overhead benchmark)" if n == 1 else ""),
                "functions": {"myadd": "A, B, C: float32[%d]; C = A + B" % n},
                "signatures": {"myadd": [arg("A", "float32", [n]), arg("B", "float32", [n]),
                                         arg("C", "float32", [n], "out")]},
                "calls": [call("myadd", "ABC", "C")],
                "entry_function": "myadd",  # __tvm_main__ names it: a one-function library
                "runtime_calls": ir_runtime_calls(lib.get_source("ll")),
            })

    def add_dynamic(self):
        from tvm import te

        tvm = self.tvm
        dtypes = ["float32", "float64", "int32", "int8", "uint8", "float16"]
        mod, arrays, funcs, sigs, calls = None, {}, {}, {}, []
        k = 37  # not a multiple of any vector width: the tail loop runs too
        for dt in dtypes:
            n = te.var("n")
            A = te.placeholder((n,), name="A", dtype=dt)
            B = te.placeholder((n,), name="B", dtype=dt)
            C = te.compute((n,), lambda i: A[i] + B[i], name="C")
            f = tvm.lower(te.create_schedule(C.op), [A, B, C], name="add_" + dt)
            if mod is None:
                mod = f
            else:
                mod.update(f)
            if dt.startswith("float"):
                a = self.rng.standard_normal(k).astype(dt)
                b = self.rng.standard_normal(k).astype(dt)
            elif dt == "uint8":
                a = self.rng.integers(0, 120, k).astype(dt)
                b = self.rng.integers(0, 120, k).astype(dt)
            else:  # no signed overflow (TVM emits `add nsw`)
                a = self.rng.integers(-60, 60, k).astype(dt)
                b = self.rng.integers(-60, 60, k).astype(dt)
            arrays.update({f"{dt}_A": a, f"{dt}_B": b, f"{dt}_C": (a + b).astype(dt)})
            if dt == "float16":  # raw bits too, for readers without a half type
                arrays.update({f"{dt}_{x}_bits": arrays[f"{dt}_{x}"].view("uint16")
                               for x in "ABC"})
            fn = "add_" + dt
            funcs[fn] = f"A, B, C: {dt}[n]; C = A + B"
            sigs[fn] = [arg("A", dt, ["n"], key=f"{dt}_A"), arg("B", dt, ["n"], key=f"{dt}_B"),
                        arg("C", dt, ["n"], "out", key=f"{dt}_C")]
            calls.append(call(fn, [f"{dt}_A", f"{dt}_B", f"{dt}_C"], [f"{dt}_C"]))
        lib = tvm.build(mod, target=self.tgt)
        self.export("add_dynamic", lib, arrays, {
            "description": "dynamic-shape add (n = A.shape[0]) in six dtypes, one module with "
                           "several functions (hence no __tvm_main__)",
            "functions": funcs,
            "signatures": sigs,
            "calls": calls,
            "runtime_calls": ir_runtime_calls(lib.get_source("ll")),
        })

    def parallel(self):
        from tvm import te
        from tvm.script import tir as T

        tvm = self.tvm
        # 1. s[B].parallel: 64 chunks of 1024 elements shared by the pool's threads.
        N = 1 << 16
        A = te.placeholder((N,), name="A")
        B = te.compute((N,), lambda i: A[i] * 2.0 + 1.0, name="B")
        s = te.create_schedule(B.op)
        xo, _ = s[B].split(B.op.axis[0], factor=1024)
        s[B].parallel(xo)
        mod = tvm.lower(s, [A, B], name="scale_shift")

        # 2. Two parallel loops in ONE parallel launch separated by TVMBackendParallelBarrier.
        # pragma_parallel_launch_point makes the whole body one TVMBackendParallelLaunch (every
        # task runs it; each parallel loop is split into contiguous blocks by task id) and
        # pragma_parallel_barrier_when_finish emits the barrier after the loop it wraps
        # (codegen_cpu.cc). The second loop reads B[M-1-j], written by another task, and the
        # first loop's work grows with i (B[i] is a prefix sum of i//64 + 1 elements), so the
        # last task finishes it last: without a working barrier, task 0 reads unfinished values.
        M = 1 << 14

        @T.prim_func
        def parallel_barrier(A: T.Buffer((M,), "float32"), B: T.Buffer((M,), "float32"),
                             C: T.Buffer((M,), "float32")):
            T.func_attr({"global_symbol": "parallel_barrier", "tir.noalias": True})
            with T.attr(0, "pragma_parallel_launch_point", 1):
                with T.attr(0, "pragma_parallel_barrier_when_finish", 1):
                    for i in T.parallel(M):
                        B[i] = T.float32(0)
                        for r in range(i // 64 + 1):
                            B[i] = B[i] + A[r]
                for j in T.parallel(M):
                    C[j] = B[j] + B[M - 1 - j]

        mod.update(tvm.IRModule({"parallel_barrier": parallel_barrier}))
        lib = tvm.build(mod, target=self.tgt)
        ll = lib.get_source("ll")
        calls_ = ir_runtime_calls(ll)
        assert "TVMBackendParallelLaunch" in calls_, calls_
        assert "TVMBackendParallelBarrier" in calls_, calls_
        a = self.rng.standard_normal(N).astype("float32")
        # small integers: every partial sum is exact in float32, whatever the order
        x = self.rng.integers(-8, 9, M).astype("float32")
        y = np.cumsum(x, dtype="float32")[np.arange(M) // 64]
        self.export("parallel", lib, {
            "A": a, "B": a * np.float32(2) + np.float32(1),
            "barrier_A": x, "barrier_B": y, "barrier_C": y + y[::-1],
            "uses_parallel_launch": np.array(True), "uses_parallel_barrier": np.array(True),
        }, {
            "description": "thread-pool kernels: a parallel outer loop (64 chunks), and two "
                           "parallel loops in one launch joined by TVMBackendParallelBarrier",
            "functions": {
                "scale_shift": "A, B: float32[65536]; B = 2A + 1 (parallel outer loop, 64 "
                               "chunks of 1024)",
                "parallel_barrier": "A, B, C: float32[16384]; B[i] = sum(A[0..i//64]), "
                                    "barrier, C[j] = B[j] + B[16383-j] (one parallel launch)",
            },
            "signatures": {
                "scale_shift": [arg("A", "float32", [N]), arg("B", "float32", [N], "out")],
                "parallel_barrier": [arg("A", "float32", [M], key="barrier_A"),
                                     arg("B", "float32", [M], "out", key="barrier_B"),
                                     arg("C", "float32", [M], "out", key="barrier_C")],
            },
            "calls": [call("scale_shift", "AB", "B", repeat=20),
                      call("parallel_barrier", ["barrier_A", "barrier_B", "barrier_C"],
                           ["barrier_B", "barrier_C"], repeat=50)],
            "runtime_calls": calls_,
        })

    def workspace(self):
        from tvm import te

        tvm = self.tvm
        M = 64
        X = te.placeholder((M, M), name="X")
        Y = te.placeholder((M, M), name="Y")
        k = te.reduce_axis((0, M), name="k")
        T_ = te.compute((M, M), lambda i, j: te.sum(X[i, k] * Y[k, j], axis=k), name="T")
        Z = te.compute((M, M), lambda i, j: T_[i, j] + 1.0, name="Z")
        s = te.create_schedule(Z.op)
        # T is a 16 KiB intermediate: above the 1 KiB stack limit, so it is a workspace.
        lib = tvm.build(s, [X, Y, Z], self.tgt, name="matmul_plus_one")
        ll = lib.get_source("ll")
        uses_ws = "TVMBackendAllocWorkspace" in ll
        assert uses_ws, "the workspace kernel does not call TVMBackendAllocWorkspace"
        # tail call ptr %4(i32 device_type, i32 device_id, i64 nbytes, i32 dtype_code, i32 bits)
        sizes = [int(m) for m in re.findall(
            r"call ptr %\w+\(i32 1, i32 %\w+, i64 (\d+), i32 \d+, i32 \d+\)", ll)]
        x = self.rng.standard_normal((M, M)).astype("float32")
        y = self.rng.standard_normal((M, M)).astype("float32")
        z = (x.astype("float64") @ y.astype("float64") + 1).astype("float32")
        self.export("workspace", lib, {
            "X": x, "Y": y, "Z": z, "uses_workspace": np.array(uses_ws),
            "workspace_bytes": np.array(sizes, dtype="int64"),
        }, {
            "description": "naive matmul through a 16 KiB intermediate buffer allocated with "
                           "TVMBackendAllocWorkspace / freed with TVMBackendFreeWorkspace",
            "functions": {"matmul_plus_one": "X, Y, Z: float32[64,64]; Z = X@Y + 1"},
            "signatures": {"matmul_plus_one": [arg("X", "float32", [M, M]),
                                               arg("Y", "float32", [M, M]),
                                               arg("Z", "float32", [M, M], "out")]},
            "calls": [call("matmul_plus_one", "XYZ", "Z", rtol=1e-5, atol=1e-4, repeat=3)],
            "workspace_bytes": sizes,
            "runtime_calls": ir_runtime_calls(ll),
        })

    def packed_call(self):
        from tvm import te, tir

        tvm = self.tvm
        n = 16
        A = te.placeholder((n,), name="A")
        B = te.extern(
            (n,), [A],
            lambda ins, outs: tir.call_packed("tvmrt_test.add_scalar", ins[0], outs[0], 3.0),
            name="B", dtype="float32")
        s = te.create_schedule(B.op)
        lib = tvm.build(s, [A, B], self.tgt, name="call_packed")
        ll = lib.get_source("ll")
        a = self.rng.standard_normal(n).astype("float32")
        self.export("packed_call", lib, {"A": a, "B": a + np.float32(3.0)}, {
            "description": "a kernel that looks up a global packed function through "
                           "TVMBackendGetFuncFromEnv and calls it with TVMFuncCall",
            "functions": {
                "call_packed": "A, B: float32[16]; calls tvmrt_test.add_scalar(A, B, 3.0), "
                               "which the test registers to compute B = A + 3.0"},
            "signatures": {"call_packed": [arg("A", "float32", [n]),
                                           arg("B", "float32", [n], "out")]},
            "calls": [call("call_packed", "AB", "B")],
            "requires_global_functions": {
                "tvmrt_test.add_scalar": {
                    "args": [
                        {"type_code": 7, "kind": "DLTensor*", "dtype": "float32",
                         "shape": [n], "what": "A (a stack DLTensor over A's data)"},
                        {"type_code": 7, "kind": "DLTensor*", "dtype": "float32",
                         "shape": [n], "what": "B (the output)"},
                        {"type_code": 2, "kind": "float (v_float64)", "value": 3.0},
                    ],
                    "behaviour": "B[i] = A[i] + scalar; the return value is ignored, a "
                                 "non-zero return code makes call_packed fail",
                }
            },
            "runtime_calls": ir_runtime_calls(ll),
        })

    def syslib(self):
        from tvm import te
        from tvm.relay.backend import Runtime

        tvm = self.tvm
        n = 1024
        A = te.placeholder((n,), name="A")
        B = te.placeholder((n,), name="B")
        C = te.compute((n,), lambda i: A[i] + B[i], name="C")
        lib = tvm.build(te.create_schedule(C.op), [A, B, C], self.tgt, name="myadd",
                        runtime=Runtime("cpp", {"system-lib": True}))
        prefix = lib["__tvm_get_system_lib_prefix"]()
        obj = "syslib_add.o"
        lib.save(self.path(obj))
        # The names the object's constructor hands to TVMBackendRegisterSystemLibSymbol
        # (codegen_cpu.cc: each function under its own name, the context slot prefixed).
        registered = ["myadd", prefix + "__tvm_module_ctx"]
        with open(self.path(obj), "rb") as fh:
            blob = fh.read()
        assert all(b"\0" + r.encode() + b"\0" in blob for r in registered), registered
        a = self.rng.standard_normal(n).astype("float32")
        b = self.rng.standard_normal(n).astype("float32")
        np.savez(self.path("syslib_add.npz"), A=a, B=b, C=a + b)
        self.manifest["syslib_add"] = {
            "kind": "system-lib",
            "file": obj,
            "expected": "syslib_add.npz",
            "description": "myadd (as add_static) compiled as a system library: an ELF "
                           "relocatable object whose constructor registers its symbols with "
                           "TVMBackendRegisterSystemLibSymbol; link it into the program and get "
                           "the module from runtime.SystemLib",
            "functions": {"myadd": "A, B, C: float32[1024]; C = A + B"},
            "signatures": {"myadd": [arg("A", "float32", [n]), arg("B", "float32", [n]),
                                     arg("C", "float32", [n], "out")]},
            "calls": [call("myadd", "ABC", "C")],
            "system_lib_prefix": prefix,
            "registered_symbols": registered,
            "bytes": os.path.getsize(self.path(obj)),
            "symbols": nm_symbols(self.path(obj), dynamic=False),
            "runtime_calls": ir_runtime_calls(lib.get_source("ll")),
        }

    # -- relay models ----------------------------------------------------------------------

    def model(self, name, func_or_mod, params, inputs, link_params=False, tol=(1e-5, 1e-6),
              description="", target=None):
        tvm = self.tvm
        from tvm import relay
        from tvm.contrib import graph_executor
        from tvm.relay.backend import Executor

        mod = func_or_mod if isinstance(func_or_mod, tvm.IRModule) else \
            tvm.IRModule.from_expr(func_or_mod)
        kwargs = {}
        if link_params:
            kwargs["executor"] = Executor("graph", {"link-params": True})
        t0 = time.time()
        with tvm.transform.PassContext(opt_level=3):
            lib = relay.build(mod, target=target or self.tgt, params=params, **kwargs)
        so = self.path(name + ".so")
        lib.export_library(so)
        # Expected outputs: the reference graph executor on the exported library.
        g = graph_executor.GraphModule(tvm.runtime.load_module(so)["default"](tvm.cpu()))
        for k, v in inputs.items():
            g.set_input(k, v)
        g.run()
        arrays = dict(inputs)
        outputs = {}
        for i in range(g.get_num_outputs()):
            o = g.get_output(i).numpy()
            arrays[f"output_{i}"] = o
            outputs[f"output_{i}"] = [list(o.shape), str(o.dtype)]
        np.savez(self.path(name + ".npz"), **arrays)
        graph = json.loads(lib.get_graph_json())
        kernels = sorted({n["attrs"]["func_name"] for n in graph["nodes"] if n["op"] == "tvm_op"})
        self.manifest[name] = {
            "kind": "graph",
            "graph": True,
            "file": name + ".so",
            "expected": name + ".npz",
            "description": description,
            "functions": {
                "default": "factory: default(DLDevice dev) -> GraphExecutor module "
                           "(set_input, run, get_output, ...)",
                "get_graph_json": "() -> str",
                "get_graph_params": "() -> Map<str, NDArray> (empty with link-params)",
            },
            "inputs": {k: [list(v.shape), str(v.dtype)] for k, v in inputs.items()},
            "outputs": outputs,
            "params": len(lib.get_params()),
            "link_params": link_params,
            "target": str(target or self.tgt),
            "kernels": kernels,
            "rtol": tol[0],
            "atol": tol[1],
            "bytes": os.path.getsize(so),
            "symbols": nm_symbols(so),
            "build_seconds": round(time.time() - t0, 1),
        }
        return lib

    def mlp_models(self):
        tvm = self.tvm
        from tvm import relay

        def mlp():
            x = relay.var("data", shape=(1, 64), dtype="float32")
            w1, b1 = relay.var("w1", shape=(32, 64)), relay.var("b1", shape=(32,))
            w2, b2 = relay.var("w2", shape=(10, 32)), relay.var("b2", shape=(10,))
            h = relay.nn.relu(relay.nn.bias_add(relay.nn.dense(x, w1), b1))
            y = relay.nn.softmax(relay.nn.bias_add(relay.nn.dense(h, w2), b2))
            # Scaled (1/sqrt(fan_in) weights, small biases) so that the logits are O(1) and the
            # softmax output is spread out rather than one-hot.
            r = np.random.default_rng(0)
            params = {k: tvm.nd.array((r.standard_normal(s) * scale).astype("float32"))
                      for k, s, scale in [("w1", (32, 64), 0.125), ("b1", (32,), 0.1),
                                          ("w2", (10, 32), 0.177), ("b2", (10,), 0.1)]}
            return relay.Function([x, w1, b1, w2, b2], y), params

        data = {"data": np.sin(np.arange(64) * 0.1).astype("float32").reshape(1, 64)}
        f, params = mlp()
        lib = self.model("mlp", f, params, data, description=(
            "dense(64->32)+bias+relu, dense(32->10)+bias, softmax; parameters in the library "
            "(get_graph_params); also as mlp.json + mlp.params"))
        with open(self.path("mlp.json"), "w") as fh:
            fh.write(lib.get_graph_json())
        with open(self.path("mlp.params"), "wb") as fh:
            fh.write(relay.save_param_dict(lib.get_params()))
        self.manifest["mlp"]["graph_json"] = "mlp.json"
        self.manifest["mlp"]["params_file"] = "mlp.params"
        f, params = mlp()
        self.model("mlp_linked", f, params, data, link_params=True, description=(
            "the mlp with Executor(\"graph\", {\"link-params\": True}): the weights are "
            "constants inside the kernels, the graph's only input is data"))

    def conv_model(self):
        tvm = self.tvm
        from tvm import relay

        x = relay.var("data", shape=(1, 3, 32, 32), dtype="float32")
        w = relay.var("w", shape=(8, 3, 3, 3))
        b = relay.var("b", shape=(8,))
        wd = relay.var("wd", shape=(10, 8 * 16 * 16))
        h = relay.nn.conv2d(x, w, padding=(1, 1), channels=8, kernel_size=(3, 3))
        h = relay.nn.relu(relay.nn.bias_add(h, b))
        h = relay.nn.max_pool2d(h, pool_size=(2, 2), strides=(2, 2))
        y = relay.nn.dense(relay.nn.batch_flatten(h), wd)
        r = np.random.default_rng(1)
        params = {k: tvm.nd.array(r.standard_normal(s).astype("float32") * 0.1)
                  for k, s in [("w", (8, 3, 3, 3)), ("b", (8,)), ("wd", (10, 2048))]}
        self.model("conv", relay.Function([x, w, b, wd], y), params,
                   {"data": r.standard_normal((1, 3, 32, 32)).astype("float32")},
                   description="conv2d(3->8, 3x3, pad 1)+bias+relu, max_pool 2x2, flatten, "
                               "dense(2048->10)")

    def big_models(self):
        from tvm.relay import testing

        r = np.random.default_rng(2)
        data = {"data": r.standard_normal((1, 3, 224, 224)).astype("float32")}
        mod, params = testing.resnet.get_workload(num_layers=18, batch_size=1,
                                                  image_shape=(3, 224, 224))
        self.model("resnet18", mod, params, data, tol=(1e-4, 1e-5), target=MODEL_TARGET,
                   description=(
            "relay.testing ResNet-18 (random weights), NCHW 1x3x224x224 -> softmax 1x1000"))
        mod, params = testing.mobilenet.get_workload(batch_size=1)
        self.model("mobilenet", mod, params, data, tol=(1e-4, 1e-5), target=MODEL_TARGET,
                   description=(
            "relay.testing MobileNet v1 (random weights), NCHW 1x3x224x224 -> softmax 1x1000"))

    # -- relax VM executables --------------------------------------------------------------

    def relax_export(self, name, mod, calls, description, target=None):
        """Builds a Relax IRModule with relax.build (after LegalizeOps and LambdaLift, which
        hand-written Relax needs), exports NAME.so, runs every call on the reference VM and
        saves its inputs and outputs: NAME.npz, and the same arrays as NAME/KEY.npy.

        `calls`: [(function, [(key, input array)...], result)] where `result` mirrors the
        returned value: a key (a tensor), {"shape": key} (a ShapeTuple, saved as int64) or a
        list (a tuple)."""
        tvm = self.tvm
        from tvm import relax
        from tvm.runtime import relax_vm

        t0 = time.time()
        public = {gv.name_hint: f for gv, f in mod.functions.items()
                  if isinstance(f, relax.Function)}
        lowered = relax.transform.LambdaLift()(relax.transform.LegalizeOps()(mod))
        target = target or self.tgt
        ex = relax.build(lowered, target)
        so = self.path(name + ".so")
        ex.export_library(so)
        disasm = name + ".relax.txt"
        with open(self.path(disasm), "w") as fh:
            fh.write(ex.as_text())
        lib = tvm.runtime.load_module(so)
        assert lib.type_key == "relax.Executable", lib.type_key
        vm = relax_vm.VirtualMachine(lib, tvm.cpu())

        arrays, entries = {}, []
        for fn, inputs, result in calls:
            for k, a in inputs:
                assert k not in arrays, k
                arrays[k] = a
            # the first run's inputs are copies: the outputs must not depend on the buffers
            got = vm[fn](*[tvm.nd.array(a.copy()) for _, a in inputs])
            outs = []

            def save(res, val):
                if isinstance(res, list):
                    assert isinstance(val, tvm.ir.container.Array) and len(val) == len(res), \
                        (name, fn, type(val))
                    for r, v in zip(res, val):
                        save(r, v)
                elif isinstance(res, dict):
                    assert isinstance(val, tvm.runtime.ShapeTuple), (name, fn, type(val))
                    arrays[res["shape"]] = np.array(list(val), dtype="int64")
                    outs.append(res["shape"])
                else:
                    assert isinstance(val, tvm.nd.NDArray), (name, fn, type(val))
                    assert res not in arrays, res
                    arrays[res] = val.numpy()
                    outs.append(res)

            save(result, got)
            entries.append({"function": fn, "args": [k for k, _ in inputs], "result": result,
                            "outputs": outs, "rtol": 0.0, "atol": 0.0, "repeat": 2})
        np.savez(self.path(name + ".npz"), **arrays)
        os.makedirs(self.path(name), exist_ok=True)
        for k, a in arrays.items():
            np.save(self.path(os.path.join(name, k + ".npy")), a)

        text = ex.as_text()
        packed = sorted(set(re.findall(r"^@(\S+) packed_func;", text, re.M)))
        vm_funcs = [m for m in re.findall(r"^@(\S+):$", text, re.M)]
        self.manifest[name] = {
            "kind": "relax",
            "file": name + ".so",
            "expected": name + ".npz",
            "npy_dir": name,
            "disasm": disasm,
            "description": description,
            "type_key": "relax.Executable",
            "functions": {f: relax_signature(fn) for f, fn in public.items()},
            "signatures": {f: [relax_param(p) for p in fn.params] for f, fn in public.items()},
            "vm_functions": vm_funcs,
            "packed_functions": packed,
            "builtins": [p for p in packed if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", p)],
            "calls": entries,
            "rtol": 0.0,
            "atol": 0.0,
            "target": str(target),
            "bytes": os.path.getsize(so),
            "symbols": nm_symbols(so),
            "build_seconds": round(time.time() - t0, 1),
        }
        return arrays

    def relax_mlp(self, name, batch, rows):
        """dense(64->32)+bias, relu, dense(32->10)+bias, softmax; the weights are constants of
        the executable; `batch` is an int or a symbolic tir.Var."""
        tvm = self.tvm
        from tvm import relax

        r = np.random.default_rng(3)
        w1 = (r.standard_normal((64, 32)) * 0.125).astype("float32")
        b1 = (r.standard_normal(32) * 0.1).astype("float32")
        w2 = (r.standard_normal((32, 10)) * 0.177).astype("float32")
        b2 = (r.standard_normal(10) * 0.1).astype("float32")
        bb = relax.BlockBuilder()
        x = relax.Var("x", relax.TensorStructInfo((batch, 64), "float32"))
        with bb.function("main", [x]):
            with bb.dataflow():
                h = bb.emit(relax.op.add(relax.op.matmul(x, relax.const(w1)), relax.const(b1)))
                h = bb.emit(relax.op.nn.relu(h))
                h = bb.emit(relax.op.add(relax.op.matmul(h, relax.const(w2)), relax.const(b2)))
                y = bb.emit_output(relax.op.nn.softmax(h, axis=-1))
            bb.emit_func_output(y)
        calls = []
        for n in rows:
            x_ = np.sin(np.arange(n * 64) * 0.1 + n).astype("float32").reshape(n, 64)
            sfx = "" if len(rows) == 1 else f"_n{n}"
            calls.append(("main", [("x" + sfx, x_)], "y" + sfx))
        dyn = not isinstance(batch, int)
        arrays = self.relax_export(name, bb.get(), calls, description=(
            f"relax MLP, x: float32[{'n' if dyn else batch}, 64] -> softmax float32"
            f"[{'n' if dyn else batch}, 10]; weights are executable constants"
            + ("; dynamic batch n (shape heap, make_shape)" if dyn else "")))
        for n in rows:  # the reference's outputs agree with numpy (a sanity check)
            sfx = "" if len(rows) == 1 else f"_n{n}"
            h = np.maximum(arrays["x" + sfx].astype("float64") @ w1 + b1, 0) @ w2 + b2
            e = np.exp(h - h.max(axis=-1, keepdims=True))
            np.testing.assert_allclose(arrays["y" + sfx], e / e.sum(-1, keepdims=True),
                                       rtol=1e-4, atol=1e-6)

    def relax_control(self):
        """An `if` on a bool tensor, a closure capturing an argument, a nested tuple output."""
        from tvm.script import ir as I
        from tvm.script import relax as R

        @I.ir_module
        class Control:
            @R.function
            def main(x: R.Tensor((4,), "float32"), c: R.Tensor((), "bool")):
                @R.function
                def inner(y: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
                    return R.add(y, x)

                if c:
                    z = R.multiply(x, x)
                else:
                    z = R.subtract(x, R.const(1.0, "float32"))
                w = inner(z)
                return (z, (w, x))

        x = np.array([-1.5, 0.25, 2.0, 3.0], dtype="float32")
        arrays = self.relax_export("relax_control", Control, [
            ("main", [("x", x), ("c_true", np.array(True))],
             ["z_true", ["w_true", "x_true"]]),
            ("main", [("x_2", x), ("c_false", np.array(False))],
             ["z_false", ["w_false", "x_false"]]),
        ], description=(
            "main(x: float32[4], c: bool[]) -> (z, (w, x)): z = x*x if c else x-1 (read_if_cond, "
            "If, Goto, copy), w = inner(z) = z + x through a closure over x (make_closure, "
            "invoke_closure; lifted as main_inner), a nested tuple (make_tuple)"))
        np.testing.assert_array_equal(arrays["z_true"], x * x)
        np.testing.assert_array_equal(arrays["w_false"], (x - 1) + x)

    def relax_multi(self):
        """Several functions: a VM-to-VM call, dynamic shapes, dtypes, a shape result."""
        from tvm.script import ir as I
        from tvm.script import relax as R

        @I.ir_module
        class Multi:
            @R.function
            def double(x: R.Tensor(("n",), "float32")) -> R.Tensor(("n",), "float32"):
                return R.add(x, x)

            @R.function
            def main(x: R.Tensor((8,), "float32"), w: R.Tensor((8, 8), "float32")):
                cls = Multi
                a = cls.double(x)
                b = R.matmul(w, a)
                return b

            @R.function
            def int_sum(x: R.Tensor((2, 3), "int32")) -> R.Tensor((3,), "int64"):
                return R.sum(R.astype(x, "int64"), axis=0)

            @R.function
            def shape(x: R.Tensor(("m", "n"), "float32")) -> R.Shape(ndim=2):
                return R.shape_of(x)

        r = np.random.default_rng(4)
        x = r.standard_normal(8).astype("float32")
        w = r.standard_normal((8, 8)).astype("float32")
        xi = r.integers(-1000, 1000, (2, 3)).astype("int32")
        arrays = self.relax_export("relax_multi", Multi, [
            ("main", [("x", x), ("w", w)], "main_out"),
            ("double", [("d_x", r.standard_normal(5).astype("float32"))], "d_out"),
            ("int_sum", [("s_x", xi)], "s_out"),
            ("shape", [("shape_x", np.zeros((3, 7), "float32"))], {"shape": "shape_out"}),
        ], description=(
            "several functions: main(x: float32[8], w: float32[8,8]) = w @ double(x) (a call "
            "from one VM function to another), double(x: float32[n]) = x + x, "
            "int_sum(x: int32[2,3]) = sum(int64(x), axis 0), shape(x: float32[m,n]) -> "
            "ShapeTuple (m, n)"))
        np.testing.assert_allclose(arrays["main_out"], w @ (x + x), rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(arrays["s_out"], xi.astype("int64").sum(0))
        np.testing.assert_array_equal(arrays["shape_out"], [3, 7])

    def relax_chain(self):
        """VM-overhead benchmark: 100 kernel calls on float32[4]."""
        from tvm import relax

        bb = relax.BlockBuilder()
        x = relax.Var("x", relax.TensorStructInfo((4,), "float32"))
        with bb.function("main", [x]):
            y = x
            for i in range(RELAX_CHAIN_CALLS):
                if i % 2 == 0:
                    y = bb.emit(relax.op.add(y, relax.const(np.float32(0.5))))
                else:
                    y = bb.emit(relax.op.multiply(y, relax.const(np.float32(0.75))))
            bb.emit_func_output(y)
        x_ = np.array([1.0, -2.0, 0.5, 8.0], dtype="float32")
        arrays = self.relax_export("relax_chain", bb.get(), [("main", [("x", x_)], "y")],
                                   description=(
            f"VM-overhead benchmark: main(x: float32[4]) = {RELAX_CHAIN_CALLS} alternating "
            "kernel calls y = y + 0.5, y = y * 0.75 (each with alloc_storage/alloc_tensor)"))
        want = x_.copy()
        for i in range(RELAX_CHAIN_CALLS):
            want = want + np.float32(0.5) if i % 2 == 0 else want * np.float32(0.75)
        np.testing.assert_allclose(arrays["y"], want, rtol=1e-5)

    def relax_core(self):
        from tvm import tir

        self.relax_mlp("relax_mlp", 4, [4])
        self.relax_mlp("relax_mlp_dyn", tir.Var("n", "int64"), [1, 3, 7])
        self.relax_control()
        self.relax_multi()
        self.relax_chain()

    def relax_big_models(self):
        """resnet18 and mobilenet (the relay.testing workloads of the graph fixtures) through
        relay_translator.from_relay, weights bound as executable constants: as from_relay
        leaves the kernels (unscheduled loops, one thread), and again with every kernel's
        outer loops run in parallel (parallel_outer_loops), as a scheduled model's are."""
        tvm = self.tvm
        from tvm import tir
        from tvm.relax.testing import relay_translator
        from tvm.relay import testing

        r = np.random.default_rng(2)
        data = r.standard_normal((1, 3, 224, 224)).astype("float32")
        target = tvm.target.Target(MODEL_TARGET)
        for name, (mod, params) in [
            ("relax_resnet18", testing.resnet.get_workload(num_layers=18, batch_size=1,
                                                           image_shape=(3, 224, 224))),
            ("relax_mobilenet", testing.mobilenet.get_workload(batch_size=1)),
        ]:
            rmod = relay_translator.from_relay(mod["main"], target, params, opt_level=3)
            what = (f"relay.testing {name[6:]} (random weights, bound as constants) converted "
                    "with relax.testing.relay_translator.from_relay(opt_level=3): data float32"
                    "[1,3,224,224] -> softmax float32[1,1000]")
            self.relax_export(name, rmod, [("main", [("data", data)], "output")],
                              target=target, description=what)
            kernels = [(gv, f) for gv, f in rmod.functions.items()
                       if isinstance(f, tir.PrimFunc)]
            for gv, f in kernels:
                rmod[gv] = parallel_outer_loops(f)
            self.relax_export(name + "_par", rmod, [("main", [("data", data)], "output")],
                              target=target, description=(
                what + "; every kernel's leading spatial loops fused and run in parallel"))


def parallel_outer_loops(func):
    """A plain CPU schedule for an unscheduled TE kernel: in each block under the root, the
    loops over the block's leading spatial axes become one fused loop that runs in parallel
    (TVMBackendParallelLaunch). Every iteration of such a loop writes outputs of its own and
    keeps its reduction order, so the results are the serial loops' bits. A block whose loops
    do not match its axes one to one, or whose spatial prefix has fewer than 2 iterations,
    stays serial."""
    from tvm import tir

    sch = tir.Schedule(func)
    for block in sch.get_child_blocks(sch.get_block("root")):
        loops = sch.get_loops(block)
        axes = sch.get(block).iter_vars
        if len(loops) != len(axes):
            continue
        lead = []
        for loop, axis in zip(loops, axes):
            if axis.iter_type != tir.IterVar.DataPar:
                break
            lead.append(loop)
        if not lead or int(np.prod([int(sch.get(l).extent) for l in lead])) < 2:
            continue
        sch.parallel(sch.fuse(*lead) if len(lead) > 1 else lead[0])
    return sch.mod["main"]


def build(out, groups):
    b = Builder(out)
    steps = []
    if "core" in groups:
        steps += [("add_static/add_one", b.add_static), ("add_dynamic", b.add_dynamic),
                  ("parallel", b.parallel), ("workspace", b.workspace),
                  ("packed_call", b.packed_call), ("syslib_add", b.syslib),
                  ("mlp/mlp_linked", b.mlp_models), ("conv", b.conv_model),
                  ("relax_mlp/relax_mlp_dyn/relax_control/relax_multi/relax_chain",
                   b.relax_core)]
    if "models" in groups:
        steps += [("resnet18/mobilenet", b.big_models),
                  ("relax_resnet18/relax_mobilenet (+ _par)", b.relax_big_models)]
    for label, step in steps:
        t0 = time.time()
        step()
        log(f"  built {label} ({time.time() - t0:.1f} s)")
    return b.manifest


# ---------------------------------------------------------------------------------------------
# Verification (run on any runtime: the compiler's libtvm.so, the reference runtime-only
# libtvm_runtime.so, or ours)


def verify(out):
    import tvm

    lib_name = os.path.realpath(tvm._ffi.base._LIB._name)
    expect = os.environ.get("TVMRT_VERIFY_EXPECT_LIB")
    if expect and lib_name != expect:
        log(f"verification loaded {lib_name}, not {expect}")
        return 1
    with open(os.path.join(out, "manifest.json")) as fh:
        manifest = json.load(fh)
    nthreads = tvm.get_global_func("runtime.NumThreads", allow_missing=True)
    log(f"verifying {len(manifest)} fixtures in {out} on {lib_name}"
        + (f" ({nthreads()} threads)" if nthreads else ""))
    failures = []

    def check_calls(name, entry, mod, e):
        for c in entry["calls"]:
            f = mod[c["function"]]
            for _ in range(c["repeat"]):
                nds = []
                for k in c["args"]:
                    if k in c["outputs"]:  # garbage first: every element must be written
                        dt = e[k].dtype
                        fill = np.nan if dt.kind == "f" else np.iinfo(dt).max
                        nds.append(tvm.nd.array(np.full(e[k].shape, fill, dt)))
                    else:
                        nds.append(tvm.nd.array(e[k]))
                f(*nds)
                for k, nd in zip(c["args"], nds):
                    want = e[k]
                    got = nd.numpy()
                    if k not in c["outputs"]:
                        np.testing.assert_array_equal(got, want, f"{name}: input {k} changed")
                    elif c["rtol"] == 0 and c["atol"] == 0:
                        np.testing.assert_array_equal(got, want, f"{name}.{c['function']}: {k}")
                    else:
                        np.testing.assert_allclose(got, want, rtol=c["rtol"], atol=c["atol"],
                                                   err_msg=f"{name}.{c['function']}: {k}")

    def check_graph(name, entry, lib, e):
        from tvm.contrib import graph_executor

        def run(g):
            for k in entry["inputs"]:
                g.set_input(k, e[k])
            g.run()
            assert g.get_num_outputs() == len(entry["outputs"])
            for i in range(g.get_num_outputs()):
                np.testing.assert_allclose(g.get_output(i).numpy(), e[f"output_{i}"],
                                           rtol=entry["rtol"], atol=entry["atol"],
                                           err_msg=f"{name}: output_{i}")

        g = graph_executor.GraphModule(lib["default"](tvm.cpu()))
        assert g.get_num_inputs() == len(entry["inputs"]) + entry["params"], name
        run(g)
        run(g)  # a second run on the same executor
        if entry.get("graph_json"):
            with open(os.path.join(out, entry["graph_json"])) as fh:
                graph = fh.read()
            with open(os.path.join(out, entry["params_file"]), "rb") as fh:
                params = fh.read()
            g2 = graph_executor.create(graph, lib, tvm.cpu())
            g2.load_params(params)
            run(g2)
            assert set(tvm.runtime.load_param_dict(params)) == \
                set(lib["get_graph_params"]().keys())

    def check_syslib(name, entry, e):
        # Link the object into a shared library whose undefined TVMBackend* symbols resolve
        # against the runtime already loaded (RTLD_GLOBAL), load it, and use runtime.SystemLib.
        import ctypes

        cc = shutil.which(os.environ.get("CC", "gcc")) or shutil.which("cc")
        if not cc:
            log(f"  {name}: skipped (no C compiler to link the object)")
            return
        with tempfile.TemporaryDirectory() as tmp:
            so = os.path.join(tmp, "syslib_check.so")
            subprocess.run([cc, "-shared", "-o", so, os.path.join(out, entry["file"])],
                           check=True)
            ctypes.CDLL(so, ctypes.RTLD_GLOBAL)
        mod = tvm.runtime.system_lib(entry["system_lib_prefix"])
        check_calls(name, entry, mod, e)

    def check_relax_value(where, res, val, e):
        # bit for bit: the same dtype, shape and bytes as the reference produced
        if isinstance(res, list):
            assert isinstance(val, tvm.ir.container.Array), f"{where}: {type(val)} not a tuple"
            assert len(val) == len(res), f"{where}: {len(val)} fields, want {len(res)}"
            for i, (r, v) in enumerate(zip(res, val)):
                check_relax_value(f"{where}[{i}]", r, v, e)
        elif isinstance(res, dict):
            assert isinstance(val, tvm.runtime.ShapeTuple), f"{where}: {type(val)} not a shape"
            assert list(val) == e[res["shape"]].tolist(), f"{where}: {list(val)}"
        else:
            assert isinstance(val, tvm.nd.NDArray), f"{where}: {type(val)} not a tensor"
            got, want = val.numpy(), e[res]
            assert got.dtype == want.dtype and got.shape == want.shape, \
                f"{where}: {got.dtype}{got.shape}, want {want.dtype}{want.shape}"
            if got.tobytes() != want.tobytes():
                np.testing.assert_array_equal(got, want, f"{where}: {res}")
                raise AssertionError(f"{where}: {res} differs in its bits")

    def check_relax(name, entry, lib, e):
        from tvm.runtime import relax_vm

        assert lib.type_key == entry["type_key"], lib.type_key
        vm = relax_vm.VirtualMachine(lib, tvm.cpu())
        for c in entry["calls"]:
            for _ in range(c["repeat"]):
                ins = [tvm.nd.array(e[k]) for k in c["args"]]
                got = vm[c["function"]](*ins)
                check_relax_value(f"{name}.{c['function']}", c["result"], got, e)
                for k, nd in zip(c["args"], ins):
                    assert nd.numpy().tobytes() == e[k].tobytes(), f"{name}: input {k} changed"

    def expected(entry):
        if not entry.get("expected"):
            return None
        with np.load(os.path.join(out, entry["expected"])) as z:
            return {k: z[k] for k in z.files}

    def add_scalar(a, b, c):
        b.copyfrom(a.numpy() + np.float32(c))

    for name, entry in manifest.items():
        t0 = time.time()
        try:
            e = expected(entry)
            if entry["kind"] == "system-lib":
                check_syslib(name, entry, e)
            else:
                lib = tvm.runtime.load_module(os.path.join(out, entry["file"]))
                if entry["kind"] == "graph":
                    check_graph(name, entry, lib, e)
                elif entry["kind"] == "relax":
                    check_relax(name, entry, lib, e)
                else:
                    for g in entry.get("requires_global_functions", {}):
                        assert g == "tvmrt_test.add_scalar", g
                        tvm.register_func(g, add_scalar, override=True)
                    if entry.get("entry_function"):
                        assert lib.entry_name == "__tvm_main__"
                        lib["__tvm_main__"]  # noqa: B018 (resolves to entry_function)
                    check_calls(name, entry, lib, e)
            if name == "workspace":
                assert bool(e["uses_workspace"]), "workspace kernel lost its workspace"
            log(f"  ok   {name} ({time.time() - t0:.2f} s)")
        except Exception as ex:  # noqa: BLE001
            failures.append(name)
            log(f"  FAIL {name}: {type(ex).__name__}: {ex}")
    if failures:
        log(f"verification FAILED: {', '.join(failures)}")
        return 1
    log(f"verification passed: {len(manifest)} fixtures")
    return 0


def verify_on_reference(out):
    """Runs --verify in a fresh interpreter on the reference runtime-only library (the one
    ours replaces) when it is there, else on the compiler's libtvm.so. The library is put alone
    in a temporary directory, so that TVM cannot pick libtvm.so from beside it."""
    env = dict(os.environ)
    env.setdefault("TVM_FFI", "ctypes")
    cache = env.get("TVMRT_CACHE", os.path.expanduser("~/.cache/tvm-runtime-rs"))
    ref = env.get("TVMRT_REF_LIB", os.path.join(cache, "wheel", "tvm", "libtvm_runtime.so"))
    with tempfile.TemporaryDirectory(prefix="tvmrt-fixtures-") as tmp:
        if os.path.isfile(ref):
            os.symlink(os.path.realpath(ref), os.path.join(tmp, "libtvm_runtime.so"))
            env["TVM_USE_RUNTIME_LIB"] = "1"
            env["TVM_LIBRARY_PATH"] = tmp
            env["TVMRT_VERIFY_EXPECT_LIB"] = os.path.realpath(ref)
        else:
            log(f"  ({ref} is missing: verifying on the compiler's runtime)")
            for k in ("TVM_USE_RUNTIME_LIB", "TVM_LIBRARY_PATH", "TVMRT_VERIFY_EXPECT_LIB"):
                env.pop(k, None)
        return subprocess.run([sys.executable, HERE, "--verify", "--out", out],
                              env=env).returncode


# ---------------------------------------------------------------------------------------------


def main():
    os.environ.setdefault("TVM_FFI", "ctypes")  # this wheel has no Cython core
    cache = os.environ.get("TVMRT_CACHE", os.path.expanduser("~/.cache/tvm-runtime-rs"))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(cache, "fixtures"))
    ap.add_argument("--models", action="store_true", help="also build resnet18 and mobilenet")
    ap.add_argument("--all", action="store_true", help="the same as --models")
    ap.add_argument("--force", action="store_true", help="rebuild even when the stamp matches")
    ap.add_argument("--verify", action="store_true",
                    help="only check the fixtures in --out on the runtime tvm loads")
    args = ap.parse_args()
    out = os.path.abspath(args.out)
    if args.verify:
        return verify(out)

    want = {"core"} | ({"models"} if args.models or args.all else set())
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a concurrent run waits here, then finds the stamp
        return build_if_needed(out, want, args.force)


def stamped_groups(out, digest):
    """The groups the stamp records for this script, provided every file the manifest lists
    is still there."""
    try:
        with open(os.path.join(out, "stamp")) as fh:
            stamp = json.load(fh)
        with open(os.path.join(out, "manifest.json")) as fh:
            manifest = json.load(fh)
    except (OSError, ValueError):
        return set()
    if not isinstance(stamp, dict) or stamp.get("script_sha256") != digest:
        return set()
    files = [e[k] for e in manifest.values()
             for k in ("file", "expected", "graph_json", "params_file", "disasm") if e.get(k)]
    if not all(os.path.isfile(os.path.join(out, f)) for f in files):
        return set()
    return set(stamp.get("groups", []))


def build_if_needed(out, want, force):
    digest = script_hash()
    stamp_path = os.path.join(out, "stamp")
    manifest_path = os.path.join(out, "manifest.json")
    have = set() if force else stamped_groups(out, digest)
    todo = [g for g in GROUPS if g in want - have]
    if not todo:
        log(f"fixtures: up to date in {out} (groups {', '.join(sorted(have))})")
        return 0

    t0 = time.time()
    manifest = {}
    keep = have - set(todo)
    if keep and os.path.exists(manifest_path):
        with open(manifest_path) as fh:
            manifest = json.load(fh)
    if os.path.exists(stamp_path):
        os.remove(stamp_path)  # written again only after a verified build
    log(f"fixtures: building {', '.join(todo)} into {out}")
    import tvm

    log(f"  compiler: tvm {tvm.__version__} ({os.path.realpath(tvm._ffi.base._LIB._name)}), "
        f"target {TARGET}")
    manifest.update(build(out, todo))
    with open(manifest_path, "w") as fh:
        json.dump(manifest, fh, indent=1)
        fh.write("\n")
    t_build = time.time() - t0
    if verify_on_reference(out) != 0:
        log("fixtures: verification failed; no stamp written")
        return 1
    with open(stamp_path, "w") as fh:
        json.dump({"script_sha256": digest, "groups": sorted(keep | set(todo)),
                   "tvm": tvm.__version__}, fh)
        fh.write("\n")

    log(f"fixtures: {len(manifest)} fixtures in {out} (built in {t_build:.1f} s, "
        f"{time.time() - t0:.1f} s with verification)")
    for name, entry in manifest.items():
        extra = ""
        if name == "workspace":
            extra = f"  workspace {entry['workspace_bytes']} bytes"
        elif entry["kind"] == "graph":
            extra = f"  inputs {entry['inputs']} params {entry['params']}"
        log(f"  {entry['file']:<16} {entry['bytes']:>10,d} B  "
            f"{', '.join(entry['functions'])}{extra}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
