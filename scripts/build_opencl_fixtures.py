#!/usr/bin/env python3
"""Builds the OpenCL test fixtures with the reference compiler (hhb-tvm 3.2.3, TVM 0.16.dev0).

    source scripts/env.sh
    $TVMRT_PYTHON scripts/build_opencl_fixtures.py [--out DIR] [--force] [--no-models]

--no-models builds all but MobileNet (about 20 s); MobileNet for the three devices takes
minutes more (the tests of those skip, or fail under TVMRT_REQUIRE_OPENCL_MODELS, which the
test command sets: it builds them all).

DIR defaults to $TVMRT_CACHE/fixtures/opencl. The reference runtime is built without OpenCL,
so nothing here runs an OpenCL kernel: expected outputs come from numpy (kernels) or from the
same model compiled for the CPU and run on the reference runtime (models). DIR/stamp records
this script's SHA-256; a run whose hash is recorded does nothing.

Fixtures (host code `llvm -mtriple=x86_64-linux-gnu`, TOPHUB_LOCATION=NONE):
  cl_add.so        C = A + B, float32[n] (n dynamic), split by 64 onto blockIdx.x/threadIdx.x:
                   the kernel `cl_add_kernel` takes A, B, C, n and the two launch extents
  cl_scale.so      B = A * s + t (float32 scalar s, int32 t), 2-D launch [blockIdx.x,
                   threadIdx.y] on float32[m, 8] (m dynamic)
  cl_conv.so       conv2d + bias + relu + max_pool + dense (the CPU fixture `conv`'s graph with
                   its own weights) for `opencl`, cl_conv.npz: data and the CPU output
  cl_hetero.so     dense on OpenCL, relu + softmax on the CPU (on_device annotations, a
                   __copy node between them; created with both devices), cl_hetero.npz
  cl_relax_mlp.so  a Relax matmul + relu for `opencl` (dlight's GPU schedules), run by the
                   Relax VM; cl_relax_mlp.npz: x, w and the CPU build's output
  mobilenet_<dev>.so  relay.testing MobileNet v1 for `opencl -device=<dev>`, dev in mali and
                   intel_graphics (and adreno: texture scopes), with weights of real spread
                   (see spread_params); mobilenet_cl.npz: data and the output of the same model
                   compiled for llvm and run on the reference graph executor
"""
import argparse
import hashlib
import json
import os
import sys
import time

import numpy as np

TRIPLE = "x86_64-linux-gnu"
HOST = "llvm -mtriple=" + TRIPLE
HERE = os.path.abspath(__file__)
MOBILENET_DEVICES = ("mali", "intel_graphics", "adreno")


def log(msg):
    print(f"[opencl fixtures] {msg}", flush=True)


def script_hash():
    with open(HERE, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def spread_params(params, seed):
    """Weights with real spread: conv/dense weights N(0, 1/fan_in), batch-norm statistics away
    from the identity (the workload's defaults give an almost constant softmax)."""
    import tvm

    r = np.random.default_rng(seed)
    out = {}
    for k, v in params.items():
        shape = v.shape
        if k.endswith("_weight") and len(shape) >= 2:
            fan_in = int(np.prod(shape[1:]))
            a = r.standard_normal(shape) * np.sqrt(2.0 / fan_in)
        elif k.endswith("_gamma"):
            a = r.uniform(0.5, 1.5, shape)
        elif k.endswith("_beta") or k.endswith("_bias"):
            a = r.standard_normal(shape) * 0.1
        elif k.endswith("_moving_mean"):
            a = r.standard_normal(shape) * 0.1
        elif k.endswith("_moving_var"):
            a = r.uniform(0.5, 1.5, shape)
        else:
            a = r.standard_normal(shape) * 0.1
        out[k] = tvm.nd.array(a.astype(v.dtype))
    return out


class Builder:
    def __init__(self, out):
        import tvm

        self.tvm = tvm
        self.out = out
        self.manifest = {}

    def path(self, name):
        return os.path.join(self.out, name)

    def target(self, device=None):
        t = "opencl" if device is None else f"opencl -device={device}"
        return self.tvm.target.Target(t, host=HOST)

    def kernels(self):
        tvm = self.tvm
        from tvm import te

        n = te.var("n")
        A = te.placeholder((n,), name="A")
        B = te.placeholder((n,), name="B")
        C = te.compute((n,), lambda i: A[i] + B[i], name="C")
        s = te.create_schedule(C.op)
        bx, tx = s[C].split(C.op.axis[0], factor=64)
        s[C].bind(bx, te.thread_axis("blockIdx.x"))
        s[C].bind(tx, te.thread_axis("threadIdx.x"))
        lib = tvm.build(s, [A, B, C], self.target(), name="cl_add")
        lib.export_library(self.path("cl_add.so"))
        self.manifest["cl_add"] = {"file": "cl_add.so", "function": "cl_add",
                                   "kernel": "cl_add_kernel"}

        m = te.var("m")
        X = te.placeholder((m, 8), name="X")
        sc = te.var("s", dtype="float32")
        t = te.var("t", dtype="int32")
        Y = te.compute((m, 8), lambda i, j: X[i, j] * sc + t.astype("float32"), name="Y")
        s = te.create_schedule(Y.op)
        s[Y].bind(Y.op.axis[0], te.thread_axis("blockIdx.x"))
        s[Y].bind(Y.op.axis[1], te.thread_axis("threadIdx.y"))
        lib = tvm.build(s, [X, sc, t, Y], self.target(), name="cl_scale")
        lib.export_library(self.path("cl_scale.so"))
        self.manifest["cl_scale"] = {"file": "cl_scale.so", "function": "cl_scale"}

    def graph(self, name, mod, params, target, data):
        tvm = self.tvm
        from tvm import relay

        t0 = time.time()
        with tvm.transform.PassContext(opt_level=3):
            lib = relay.build(mod, target=target, params=params)
        lib.export_library(self.path(name + ".so"))
        graph = json.loads(lib.get_graph_json())
        scopes = graph.get("attrs", {}).get("storage_scope", ["list_str", []])[1]
        self.manifest[name] = {"file": name + ".so", "target": str(target),
                               "texture_scopes": sum("texture" in s for s in scopes),
                               "build_seconds": round(time.time() - t0, 1)}
        log(f"{name}: {time.time() - t0:.1f} s")

    def cpu_reference(self, name, mod, params, data):
        """Runs `mod` compiled for the CPU on the reference graph executor."""
        tvm = self.tvm
        from tvm import relay
        from tvm.contrib import graph_executor

        with tvm.transform.PassContext(opt_level=3):
            lib = relay.build(mod, target=HOST, params=params)
        g = graph_executor.GraphModule(lib["default"](tvm.cpu()))
        for k, v in data.items():
            g.set_input(k, v)
        g.run()
        out = g.get_output(0).numpy()
        np.savez(self.path(name + ".npz"), output_0=out, **data)
        log(f"{name}: CPU output {out.shape}, std {out.std():.3g}, max {out.max():.3g}")

    def conv(self):
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
        mod = tvm.IRModule.from_expr(relay.Function([x, w, b, wd], y))
        r = np.random.default_rng(7)
        params = {k: tvm.nd.array((r.standard_normal(s) * sc).astype("float32"))
                  for k, s, sc in [("w", (8, 3, 3, 3), 0.3), ("b", (8,), 0.1),
                                   ("wd", (10, 2048), 0.03)]}
        data = {"data": r.standard_normal((1, 3, 32, 32)).astype("float32")}
        self.graph("cl_conv", mod, params, self.target(), data)
        self.cpu_reference("cl_conv", mod, params, data)

    def hetero(self):
        """A heterogeneous graph: the dense layer on OpenCL, relu and softmax on the CPU (relay's
        on_device annotations, the CPU as the fallback device); the graph copies between the
        two (a __copy node) and its executor takes both devices."""
        tvm = self.tvm
        from tvm import relay

        def model(annotate):
            x = relay.var("x", shape=(4, 64), dtype="float32")
            w = relay.var("w", shape=(32, 64), dtype="float32")
            d = relay.nn.dense(x, w)
            if annotate:
                d = relay.annotation.on_device(d, tvm.device("opencl"))
            y = relay.nn.softmax(relay.nn.relu(d))
            if annotate:
                y = relay.annotation.on_device(y, tvm.cpu())
            return tvm.IRModule.from_expr(relay.Function([x, w], y))

        r = np.random.default_rng(11)
        params = {"w": tvm.nd.array((r.standard_normal((32, 64)) * 0.3).astype("float32"))}
        data = {"x": r.standard_normal((4, 64)).astype("float32")}
        t0 = time.time()
        targets = {"cpu": tvm.target.Target(HOST), "opencl": self.target()}
        with tvm.transform.PassContext(opt_level=3, config={"relay.fallback_device_type": 1}):
            lib = relay.build(model(True), target=targets, params=params)
        lib.export_library(self.path("cl_hetero.so"))
        graph = json.loads(lib.get_graph_json())
        devices = sorted(set(graph["attrs"]["device_index"][1]))
        kinds = [n["name"] for n in graph["nodes"] if n["op"] == "tvm_op"]
        if devices != [1, 4] or "__copy" not in kinds:
            raise SystemExit(f"cl_hetero: expected CPU and OpenCL nodes and a copy, got "
                             f"devices {devices}, nodes {kinds}")
        self.manifest["cl_hetero"] = {"file": "cl_hetero.so", "devices": devices,
                                      "nodes": kinds,
                                      "build_seconds": round(time.time() - t0, 1)}
        log(f"cl_hetero: devices {devices}, nodes {kinds}")
        self.cpu_reference("cl_hetero", model(False), params, data)

    def relax_mlp(self):
        """A Relax model for OpenCL: matmul + relu, legalised and given GPU schedules by dlight
        (relax has no OpenCL schedules of its own), against the same model built for the CPU and
        run on the reference's Relax VM."""
        tvm = self.tvm
        from tvm import dlight as dl
        from tvm import relax

        def model():
            bb = relax.BlockBuilder()
            x = relax.Var("x", relax.TensorStructInfo((4, 64), "float32"))
            w = relax.Var("w", relax.TensorStructInfo((64, 32), "float32"))
            with bb.function("main", [x, w]):
                with bb.dataflow():
                    y = bb.emit(relax.op.nn.relu(relax.op.matmul(x, w)))
                    out = bb.emit_output(y)
                bb.emit_func_output(out)
            return relax.transform.LegalizeOps()(bb.get())

        t0 = time.time()
        target = self.target()
        with target:
            mod = dl.ApplyDefaultSchedule(dl.gpu.Matmul(), dl.gpu.GEMV(), dl.gpu.Reduction(),
                                          dl.gpu.GeneralReduction(), dl.gpu.Fallback())(model())
        relax.build(mod, target=target).export_library(self.path("cl_relax_mlp.so"))
        self.manifest["cl_relax_mlp"] = {"file": "cl_relax_mlp.so", "function": "main",
                                         "build_seconds": round(time.time() - t0, 1)}
        r = np.random.default_rng(12)
        data = {"x": r.standard_normal((4, 64)).astype("float32"),
                "w": (r.standard_normal((64, 32)) * 0.2).astype("float32")}
        vm = relax.VirtualMachine(relax.build(model(), target=HOST), tvm.cpu())
        out = vm["main"](*(tvm.nd.array(data[k]) for k in ("x", "w"))).numpy()
        np.savez(self.path("cl_relax_mlp.npz"), output_0=out, **data)
        log(f"cl_relax_mlp: {time.time() - t0:.1f} s, CPU output {out.shape}, max {out.max():.3g}")

    def mobilenet(self):
        from tvm.relay import testing

        mod, params = testing.mobilenet.get_workload(batch_size=1)
        params = spread_params(params, 3)
        r = np.random.default_rng(4)
        data = {"data": r.standard_normal((1, 3, 224, 224)).astype("float32")}
        for dev in MOBILENET_DEVICES:
            self.graph(f"mobilenet_{dev}", mod, params, self.target(dev), data)
        self.cpu_reference("mobilenet_cl", mod, params, data)


def main():
    ap = argparse.ArgumentParser()
    cache = os.environ.get("TVMRT_CACHE", os.path.expanduser("~/.cache/tvm-runtime-rs"))
    ap.add_argument("--out", default=os.path.join(cache, "fixtures", "opencl"))
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--no-models", action="store_true", help="skip mobilenet")
    a = ap.parse_args()
    os.environ.setdefault("TOPHUB_LOCATION", "NONE")
    os.makedirs(a.out, exist_ok=True)
    stamp = os.path.join(a.out, "stamp")
    want = script_hash() + (" kernels" if a.no_models else " all")
    if not a.force and os.path.exists(stamp):
        with open(stamp) as f:
            have = f.read().strip()
        if have == want or (a.no_models and have == script_hash() + " all"):
            log(f"up to date in {a.out}")
            return 0
    if os.path.exists(stamp):
        os.remove(stamp)
    t0 = time.time()
    b = Builder(a.out)
    b.kernels()
    b.conv()
    b.hetero()
    b.relax_mlp()
    if not a.no_models:
        b.mobilenet()
    with open(os.path.join(a.out, "manifest.json"), "w") as f:
        json.dump(b.manifest, f, indent=1, sort_keys=True)
    with open(stamp, "w") as f:
        f.write(want + "\n")
    log(f"built in {time.time() - t0:.0f} s into {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
