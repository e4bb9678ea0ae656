"""Tracker at scale on one machine: TVM's Python tracker (`python -m tvm.exec.rpc_tracker`) with
16 of our servers (`tvmrt rpc-server --tracker ... --key ...`) registered, and 8 client
processes (TVM's Python client, `connect_tracker(...).request(key)`) asking for 64 sessions in
all, at once. Each session makes one call and a 1 MiB round trip of an array, then closes. Prints
a Markdown table: every request served, how many servers took part, the time per request.

    source scripts/env.sh
    TVM_LIBRARY_PATH=<dir with a libtvm_runtime.so> TVM_USE_RUNTIME_LIB=1 \
        $TVMRT_PYTHON benches/rpc_tracker_bench.py [--servers 16] [--clients 8] [--requests 64]

(`scripts/bench_rpc.sh` runs it with the clients on our runtime and on the reference's.)
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np
import tvm
import tvm.rpc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
import rpc_helpers as R  # noqa: E402

KEY = "tvmrt-bench"
ARRAY_FLOATS = (1 << 20) // 4


def client(tracker_port, n):
    """One client process: waits for `go` on stdin, then runs `n` sessions one after another and
    prints one JSON line of timings."""
    tr = tvm.rpc.connect_tracker(R.HOST, tracker_port)
    data = np.random.rand(ARRAY_FLOATS).astype("float32")
    print("ready", flush=True)
    sys.stdin.readline()
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        sess = tr.request(KEY, session_timeout=120, max_retry=20)
        t1 = time.perf_counter()
        assert sess.get_function("runtime.GetDeviceAttr")(1, 0, 0) == 1
        arr = tvm.nd.array(data, sess.cpu(0))
        assert (arr.numpy() == data).all()
        del arr
        sess._sess.get_function("CloseRPCConnection")()
        t2 = time.perf_counter()
        out.append({"request": t1 - t0, "total": t2 - t0})
    print(json.dumps(out), flush=True)


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--servers", type=int, default=16)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--client", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--tracker-port", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.client is not None:
        client(a.tracker_port, a.client)
        return
    if a.requests % a.clients:
        sys.exit("--requests must be a multiple of --clients")
    tr = R.tracker(port=9190)
    servers, clients = [], []
    try:
        t0 = time.perf_counter()
        for i in range(a.servers):
            servers.append(
                R.tvmrt_server("--tracker", f"{R.HOST}:{tr.port}", "--key", KEY, port=9700 + 10 * i)
            )
        summary = tvm.rpc.connect_tracker(R.HOST, tr.port)

        def free():
            return summary.summary()["queue_info"].get(KEY, {}).get("free", 0)

        deadline = time.time() + 120
        while free() < a.servers and time.time() < deadline:
            time.sleep(0.2)
        registered = free()
        t_up = time.perf_counter() - t0
        per = a.requests // a.clients
        for _ in range(a.clients):
            clients.append(
                subprocess.Popen(
                    [sys.executable, os.path.abspath(__file__), "--client", str(per),
                     "--tracker-port", str(tr.port)],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                )
            )
        for c in clients:
            line = c.stdout.readline()
            if line.strip() != "ready":
                raise RuntimeError(f"a client did not start: {line!r}")
        t_go = time.perf_counter()
        for c in clients:
            c.stdin.write("go\n")
            c.stdin.flush()
        results = []
        for c in clients:
            out, _ = c.communicate(timeout=600)
            if c.returncode != 0:
                raise RuntimeError(f"a client failed (exit {c.returncode})")
            results += json.loads(out.strip().splitlines()[-1])
        wall = time.perf_counter() - t_go
        deadline = time.time() + 30
        while free() < a.servers and time.time() < deadline:
            time.sleep(0.2)
        free_after = free()
        served = [s.output().count("session from") for s in servers]
    finally:
        for c in clients:
            if c.poll() is None:
                c.kill()
        for s in servers:
            s.close()
        tr.close()
    req = [r["request"] * 1e3 for r in results]
    tot = [r["total"] * 1e3 for r in results]
    print(f"| measure ({a.servers} servers, {a.clients} client processes) | value |")
    print("|---|---|")
    print(f"| servers registered (tracker summary) | {registered} of {a.servers} (in {t_up:.1f} s) |")
    print(f"| requests served | {len(results)} of {a.requests} ({sum(served)} sessions logged by the servers) |")
    print(f"| servers that served | {sum(1 for n in served if n)} (sessions per server: {min(served)}..{max(served)}) |")
    print(f"| free again afterwards | {free_after} of {a.servers} |")
    print(f"| wall time, all requests | {wall:.2f} s ({len(results) / wall:.1f} sessions/s) |")
    print(f"| request (tracker match + connect), median / p95 / max | "
          f"{statistics.median(req):.1f} / {pct(req, 0.95):.1f} / {max(req):.1f} ms |")
    print(f"| whole session (request, call, 1 MiB up + down, close), median / p95 / max | "
          f"{statistics.median(tot):.1f} / {pct(tot, 0.95):.1f} / {max(tot):.1f} ms |")
    if len(results) != a.requests or sum(served) != a.requests or free_after != a.servers:
        sys.exit("FAILED: not every request was served, or a server did not come back")


if __name__ == "__main__":
    main()
