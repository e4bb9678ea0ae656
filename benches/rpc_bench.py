"""RPC benchmark on loopback: TVM's Python client on the reference runtime against the reference
server (TVM's Python tvm.rpc.Server on the reference libtvm_runtime.so) and against ours
(`tvmrt rpc-server`), side by side in one run. Prints a Markdown table of ratios.

    source scripts/env.sh
    TVM_LIBRARY_PATH=<dir with the reference libtvm_runtime.so> TVM_USE_RUNTIME_LIB=1 \
        $TVMRT_PYTHON benches/rpc_bench.py [--calls N] [--mib M]
"""

import argparse
import os
import sys
import tempfile
import time

import numpy as np
import tvm
import tvm.rpc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
import rpc_helpers as R  # noqa: E402


def measure(port, calls, mib):
    remote = tvm.rpc.connect(R.HOST, port)
    f = remote.get_function("runtime.GetDeviceAttr")
    for _ in range(200):
        f(1, 0, 0)
    best_rt = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(calls):
            f(1, 0, 0)
        best_rt = min(best_rt, (time.perf_counter() - t0) / calls)
    dev = remote.cpu(0)
    data = np.random.rand(mib * (1 << 20) // 4).astype("float32")
    arr = tvm.nd.empty(data.shape, "float32", dev)
    up = down = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        arr.copyfrom(data)
        up = min(up, time.perf_counter() - t0)
        t0 = time.perf_counter()
        back = arr.numpy()
        down = min(down, time.perf_counter() - t0)
    assert (back == data).all()
    remote._sess.get_function("CloseRPCConnection")()
    return best_rt, mib / up, mib / down


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--mib", type=int, default=64)
    a = ap.parse_args()
    d = tempfile.mkdtemp()
    os.symlink(os.environ.get("TVMRT_REF_LIB"), os.path.join(d, "libtvm_runtime.so"))
    ref = R.python_server(d, port=9400)
    ours = R.tvmrt_server(port=9600)
    try:
        r = measure(ref.port, a.calls, a.mib)
        o = measure(ours.port, a.calls, a.mib)
    finally:
        ref.close()
        ours.close()
    print("| measure | reference server | ours | ratio |")
    print("|---|---|---|---|")
    print(f"| round trip of a minimal call (us) | {r[0]*1e6:.1f} | {o[0]*1e6:.1f} | {o[0]/r[0]:.2f}x time |")
    print(f"| {a.mib} MiB upload (MiB/s) | {r[1]:.0f} | {o[1]:.0f} | {o[1]/r[1]:.2f}x bandwidth |")
    print(f"| {a.mib} MiB download (MiB/s) | {r[2]:.0f} | {o[2]:.0f} | {o[2]/r[2]:.2f}x bandwidth |")


if __name__ == "__main__":
    main()
