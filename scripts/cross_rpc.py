#!/usr/bin/env python3
"""The deployment loop of TVM's RPC for a board, under emulation: our `tvmrt rpc-server`,
cross-built for the board, runs under qemu-user; on the host, TVM's Python cross-compiles a
kernel and a model for the board, uploads them, loads and runs them remotely, times them with
time_evaluator and checks the results. Twice: with TVM's own client (the reference compiler's
runtime, in this process) and with our client (TVM's Python on our x86-64 libtvm_runtime.so,
in a subprocess, on the files the first client compiled); each directly and through TVM's
Python tracker (python -m tvm.exec.rpc_tracker, as tests/python/test_rpc_tracker.py).

    source scripts/env.sh
    $TVMRT_PYTHON scripts/cross_rpc.py --arch aarch64 \\
        --tvmrt target/cross/aarch64-unknown-linux-gnu/quick/tvmrt \\
        --runner "qemu-aarch64 -L /usr/aarch64-linux-gnu" --our-lib target/release

Servers and the tracker listen on 127.0.0.1 only, live at most --lifetime seconds and are
stopped at the end. Exit status 1 when a check fails.

The servers run with --session-threads: without binfmt_misc (this machine has none) the kernel
cannot exec a board binary, so a server under qemu-user cannot start the process it gives each
session (on a board, or with qemu registered in binfmt_misc, the default applies).
"""
import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

os.environ["TOPHUB_LOCATION"] = "NONE"
os.environ.setdefault("TVM_FFI", "ctypes")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

KEY = "tvmrt-board"
N = 1024
# The model's tolerance against float64 numpy: two dense layers (K = 64, 32) and a softmax in
# float32, as build_cross_fixtures.py's mlp: 8*u*(8 + 5.7 + 3.2) = 8.1e-6 -> 1e-5.
RTOL, ATOL = 1e-5, 1e-6


def log(msg):
    print(msg, flush=True)


class Proc:
    """A subprocess whose port is read from its output ("bind to HOST:PORT")."""

    def __init__(self, args, env=None, timeout=120):
        self.args = args
        self.log = tempfile.TemporaryFile(mode="a+")
        self.p = subprocess.Popen(args, env=env, stdout=self.log, stderr=subprocess.STDOUT,
                                  text=True)
        deadline = time.time() + timeout
        self.port = None
        while time.time() < deadline and self.p.poll() is None:
            self.log.seek(0)
            m = re.search(r"bind to [\d.]+:(\d+)", self.log.read())
            if m:
                self.port = int(m.group(1))
                return
            time.sleep(0.1)
        out = self.output()
        self.close()
        raise RuntimeError(f"{shlex.join(args)} did not start:\n{out}")

    def output(self):
        self.log.seek(0)
        return self.log.read()

    def close(self):
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(timeout=10)


# ---------------------------------------------------------------------------------------------
# The host side: compile (reference compiler only) and drive (any runtime)


def mlp_weights():
    r = np.random.default_rng(0)
    w1 = (r.standard_normal((32, 64)) * 0.125).astype("float32")
    b1 = (r.standard_normal(32) * 0.1).astype("float32")
    w2 = (r.standard_normal((10, 32)) * 0.177).astype("float32")
    b2 = (r.standard_normal(10) * 0.1).astype("float32")
    return w1, b1, w2, b2


def mlp_expected(x):
    w1, b1, w2, b2 = (a.astype("float64") for a in mlp_weights())
    h = np.maximum(x.astype("float64") @ w1.T + b1, 0) @ w2.T + b2
    e = np.exp(h - h.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def compile_for(arch, out):
    """Cross-compiles the kernel (add.so: myadd, float32[1024] vector add) and the model
    (mlp.so: graph library) for `arch` into `out`; returns the compile time."""
    import tvm
    from tvm import relay, te
    from tvm.contrib import cc

    import build_cross_fixtures as bcf

    _, gnu, target, config = bcf.ARCHES[arch]
    fcompile = cc.cross_compiler(gnu + "-gcc")
    t0 = time.time()
    A = te.placeholder((N,), name="A")
    B = te.placeholder((N,), name="B")
    C = te.compute((N,), lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=4)
    if not config.get("tir.disable_vectorize"):
        s[C].vectorize(xi)
    with tvm.transform.PassContext(config=dict(config)):
        lib = tvm.build(s, [A, B, C], target, name="myadd")
    lib.export_library(os.path.join(out, "add.so"), fcompile=fcompile)

    x = relay.var("data", shape=(1, 64), dtype="float32")
    w1, b1, w2, b2 = mlp_weights()
    h = relay.nn.relu(relay.nn.bias_add(relay.nn.dense(x, relay.const(w1)), relay.const(b1)))
    y = relay.nn.softmax(relay.nn.bias_add(relay.nn.dense(h, relay.const(w2)), relay.const(b2)))
    with tvm.transform.PassContext(opt_level=3, config=dict(config)):
        glib = relay.build(tvm.IRModule.from_expr(relay.Function([x], y)), target=target)
    glib.export_library(os.path.join(out, "mlp.so"), fcompile=fcompile)
    return time.time() - t0


def drive(remote, d, label):
    """Uploads, loads, runs, times and checks the kernel and the model on `remote`."""
    import tvm
    from tvm.contrib import graph_executor

    failures = []
    dev = remote.cpu(0)
    remote.upload(os.path.join(d, "add.so"))
    f = remote.load_module("add.so")
    r = np.random.default_rng(7)
    a, b = (r.standard_normal(N).astype("float32") for _ in range(2))
    A, B = tvm.nd.array(a, dev), tvm.nd.array(b, dev)
    C = tvm.nd.array(np.full(N, np.nan, "float32"), dev)
    f["myadd"](A, B, C)
    ok_k = np.array_equal(C.numpy(), a + b)  # one IEEE addition per element: exact
    te_k = f.time_evaluator("myadd", dev, number=20, repeat=3)(A, B, C)
    if not ok_k:
        failures.append(f"{label}: myadd")

    remote.upload(os.path.join(d, "mlp.so"))
    g = graph_executor.GraphModule(remote.load_module("mlp.so")["default"](dev))
    xin = np.sin(np.arange(64) * 0.1).astype("float32").reshape(1, 64)
    g.set_input("data", tvm.nd.array(xin, dev))
    g.run()
    got = g.get_output(0).numpy()
    want = mlp_expected(xin)
    err = float(np.max(np.abs(got - want)))
    ok_m = bool(np.all(np.abs(got - want) <= ATOL + RTOL * np.abs(want)))
    te_m = g.module.time_evaluator("run", dev, number=5, repeat=3)()
    if not ok_m:
        failures.append(f"{label}: mlp")
    log(f"  {'ok  ' if ok_k and ok_m else 'FAIL'} {label}: myadd {'exact' if ok_k else 'WRONG'}"
        f" ({te_k.mean * 1e6:.1f} us), mlp max |diff| {err:.2g} vs float64 numpy, rtol {RTOL:g}"
        f" ({te_m.mean * 1e3:.2f} ms)")
    return failures


def client_main(args):
    """Run as a subprocess on whatever runtime TVM_LIBRARY_PATH names."""
    import tvm
    import tvm.rpc

    lib = os.path.realpath(tvm._ffi.base._LIB._name)
    if args.expect_lib and lib != os.path.realpath(args.expect_lib):
        log(f"client loaded {lib}, not {args.expect_lib}")
        return 1
    failures = []
    if args.port:
        failures += drive(tvm.rpc.connect("127.0.0.1", args.port, session_timeout=300),
                          args.dir, f"{args.label}, direct")
    if args.tracker:
        tr = tvm.rpc.connect_tracker("127.0.0.1", args.tracker)
        failures += drive(tr.request(KEY, session_timeout=300), args.dir,
                          f"{args.label}, through the tracker")
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", choices=("aarch64", "armv7", "riscv64"))
    ap.add_argument("--tvmrt", help="tvmrt built for the board")
    ap.add_argument("--runner", default="", help="qemu-<arch> -L <sysroot>")
    ap.add_argument("--our-lib", help="directory of our x86-64 libtvm_runtime.so (our client)")
    ap.add_argument("--lifetime", type=float, default=600)
    # internal: the client subprocess
    ap.add_argument("--client", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--dir", help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--tracker", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--label", help=argparse.SUPPRESS)
    ap.add_argument("--expect-lib", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.client:
        return client_main(args)
    if not (args.arch and args.tvmrt):
        ap.error("--arch and --tvmrt are required")

    import tvm
    import tvm.rpc

    runner = shlex.split(args.runner)
    procs, failures = [], []
    t_start = time.time()
    with tempfile.TemporaryDirectory(prefix="tvmrt-cross-rpc-") as d:
        try:
            tracker = Proc([sys.executable, "-m", "tvm.exec.rpc_tracker", "--host", "127.0.0.1",
                            "--port", "9290", "--port-end", "9490"],
                           env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
            procs.append(tracker)
            serve = runner + [args.tvmrt, "rpc-server", "--session-threads", "--lifetime",
                              str(args.lifetime)]
            t0 = time.time()
            direct = Proc(serve + ["--port", "9500", "--port-end", "9700"])
            procs.append(direct)
            fleet = Proc(serve + ["--port", "9700", "--port-end", "9900", "--key", KEY,
                                  "--tracker", f"127.0.0.1:{tracker.port}"])
            procs.append(fleet)
            log(f"cross rpc {args.arch}: servers up under {runner[0] if runner else 'no emulator'}"
                f" in {time.time() - t0:.1f} s (ports {direct.port}, {fleet.port}; tracker "
                f"{tracker.port})")
            # wait for the registration with the tracker
            tc = tvm.rpc.connect_tracker("127.0.0.1", tracker.port)
            deadline = time.time() + 60
            while tc.summary()["queue_info"].get(KEY, {}).get("free", 0) < 1:
                if time.time() > deadline:
                    raise RuntimeError("the server did not register with the tracker:\n"
                                       + fleet.output())
                time.sleep(0.2)

            t_c = compile_for(args.arch, d)
            log(f"  compiled add.so and mlp.so for {args.arch} in {t_c:.1f} s")
            failures += drive(tvm.rpc.connect("127.0.0.1", direct.port, session_timeout=300), d,
                              "TVM's client, direct")
            failures += drive(tc.request(KEY, session_timeout=300), d,
                              "TVM's client, through the tracker")
            if args.our_lib:
                lib = os.path.join(os.path.abspath(args.our_lib), "libtvm_runtime.so")
                with tempfile.TemporaryDirectory(prefix="tvmrt-ours-") as libdir:
                    os.symlink(lib, os.path.join(libdir, "libtvm_runtime.so"))
                    env = dict(os.environ, TVM_LIBRARY_PATH=libdir, TVM_USE_RUNTIME_LIB="1",
                               TVM_FFI="ctypes", PYTHONDONTWRITEBYTECODE="1")
                    r = subprocess.run(
                        [sys.executable, os.path.abspath(__file__), "--client", "--dir", d,
                         "--port", str(direct.port), "--tracker", str(tracker.port),
                         "--label", "our client", "--expect-lib", lib], env=env)
                    if r.returncode != 0:
                        failures.append("our client")
        except Exception as e:  # a server that died: show its log
            failures.append(f"{type(e).__name__}: {e}")
            for p in procs[1:]:
                log(f"--- {shlex.join(p.args)}\n{p.output()[-3000:]}")
        finally:
            for p in reversed(procs):
                p.close()
    log(f"cross rpc {args.arch}: {'ok' if not failures else 'FAILED: ' + '; '.join(failures)}"
        f" ({time.time() - t_start:.1f} s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
