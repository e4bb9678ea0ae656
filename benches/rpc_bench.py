"""RPC benchmark on loopback: the reference server (TVM's Python tvm.rpc.Server on the reference
libtvm_runtime.so, whose C++ `rpc.ServerLoop` serves each session) and ours (`tvmrt
rpc-server`), side by side in one run, measured in alternating rounds (ABBA order) with the same
clients:

- TVM's Python client on the runtime this script runs on (`tvm.rpc.connect`), and
- a minimal client written here on a raw socket (pre-encoded `kCallFunc` packets, one send and one
  receive per call), so that the server's share of the round trip is not hidden by the client's.

The raw client also drives `benches/rpc_echo.c` (built here with `cc`), a server that answers
every packet with 40 bytes and does nothing else: the floor of the round trip on this machine's
loopback, below which no server can go; its row shows how far under the reference any server
could be.

The call is `runtime.GetDeviceAttr(1, 0, 0)` (a native global on both servers). The copies are a
float32 array of `--mib` MiB written with `copyfrom` and read back with `numpy()`. Prints a
Markdown table of medians over the rounds and the ratios, and the load average.

    source scripts/env.sh
    TVM_LIBRARY_PATH=<dir with the reference libtvm_runtime.so> TVM_USE_RUNTIME_LIB=1 \
        $TVMRT_PYTHON benches/rpc_bench.py [--calls N] [--rounds R] [--mib M]

(`scripts/bench_rpc.sh` sets this up.)
"""

import argparse
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np
import tvm
import tvm.rpc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
import rpc_helpers as R  # noqa: E402

RPC_MAGIC = 0xFF271
FUNC = "runtime.GetDeviceAttr"


class RawClient:
    """The smallest client that drives a session: handshake, kInitServer, one GetGlobalFunc,
    then pre-encoded kCallFunc packets."""

    def __init__(self, port):
        s = socket.create_connection((R.HOST, port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        key = b"client:"
        s.sendall(struct.pack("<ii", RPC_MAGIC, len(key)) + key)
        assert struct.unpack("<i", self._exact(s, 4))[0] == RPC_MAGIC
        self._exact(s, struct.unpack("<i", self._exact(s, 4))[0])
        self.s = s
        ver = b"0.8.0"
        self._request(struct.pack("<iQ", 2, len(ver)) + ver + struct.pack("<i", 0))
        name = FUNC.encode()
        reply = self._request(struct.pack("<iiiQ", 9, 1, 11, len(name)) + name)
        handle = struct.unpack("<Q", reply[-8:])[0]
        assert handle != 0, f"the server has no {FUNC}"
        body = struct.pack("<iQi", 3, handle, 3) + struct.pack("<iii", 0, 0, 0)
        body += struct.pack("<qqq", 1, 0, 0)
        self.call_packet = struct.pack("<Q", len(body)) + body
        reply = self._request(body)
        assert struct.unpack("<i", reply[:4])[0] == 4, "the call did not return"

    @staticmethod
    def _exact(s, n):
        b = b""
        while len(b) < n:
            c = s.recv(n - len(b))
            if not c:
                raise ConnectionError("the server closed the connection")
            b += c
        return b

    def _request(self, body):
        self.s.sendall(struct.pack("<Q", len(body)) + body)
        return self._exact(self.s, struct.unpack("<Q", self._exact(self.s, 8))[0])

    def calls(self, n):
        s, p = self.s, self.call_packet
        t0 = time.perf_counter()
        for _ in range(n):
            s.sendall(p)
            # The 40-byte reply comes in one segment on loopback; check its size.
            if len(s.recv(256)) != 40:
                raise RuntimeError("unexpected reply size")
        return (time.perf_counter() - t0) / n

    def close(self):
        self.s.sendall(struct.pack("<Qi", 4, 1))
        self.s.close()


class EchoClient(RawClient):
    """The raw client's call loop against the do-nothing server of benches/rpc_echo.c."""

    def __init__(self, port, call_packet):
        for _ in range(100):
            try:
                s = socket.create_connection((R.HOST, port))
                break
            except ConnectionRefusedError:
                time.sleep(0.05)
        else:
            raise RuntimeError("the echo server did not start")
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.s = s
        self.call_packet = call_packet

    def close(self):
        self.s.close()


def echo_server(workdir, port):
    """Builds and starts benches/rpc_echo.c on `port`."""
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rpc_echo.c")
    exe = os.path.join(workdir, "rpc_echo")
    subprocess.run([os.environ.get("CC", "cc"), "-O2", "-o", exe, src], check=True)
    p = subprocess.Popen([exe, str(port)], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "listening", "rpc_echo did not start"
    return p


class TvmClient:
    """TVM's Python client (`tvm.rpc.connect`) on the runtime this process loaded."""

    def __init__(self, port, mib):
        self.remote = tvm.rpc.connect(R.HOST, port)
        self.f = self.remote.get_function(FUNC)
        self.data = np.random.rand(mib * (1 << 20) // 4).astype("float32")
        self.arr = tvm.nd.empty(self.data.shape, "float32", self.remote.cpu(0))

    def calls(self, n):
        f = self.f
        t0 = time.perf_counter()
        for _ in range(n):
            f(1, 0, 0)
        return (time.perf_counter() - t0) / n

    def upload(self):
        t0 = time.perf_counter()
        self.arr.copyfrom(self.data)
        return time.perf_counter() - t0

    def download(self):
        t0 = time.perf_counter()
        back = self.arr.numpy()
        t = time.perf_counter() - t0
        assert (back == self.data).all()
        return t

    def close(self):
        del self.arr
        self.remote._sess.get_function("CloseRPCConnection")()


def alternate(rounds, fns):
    """Runs the functions in turn for `rounds` rounds, the order reversed every other round
    (ABBA); returns one list of results per function."""
    out = tuple([] for _ in fns)
    for r in range(rounds):
        order = range(len(fns)) if r % 2 == 0 else reversed(range(len(fns)))
        for i in order:
            out[i].append(fns[i]())
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--copy-rounds", type=int, default=4)
    ap.add_argument("--mib", type=int, default=64)
    a = ap.parse_args()
    d = tempfile.mkdtemp()
    os.symlink(os.environ.get("TVMRT_REF_LIB"), os.path.join(d, "libtvm_runtime.so"))
    load0 = os.getloadavg()
    ref = R.python_server(d, port=9400)
    ours = R.tvmrt_server(port=9600)
    echo = echo_server(d, 9399)
    med = statistics.median
    try:
        raw = [RawClient(ref.port), RawClient(ours.port)]
        raw.append(EchoClient(9399, raw[0].call_packet))
        for c in raw:
            c.calls(500)
        raw_t = alternate(a.rounds, [lambda c=c: c.calls(a.calls) for c in raw])
        for c in raw:
            c.close()
        tc = [TvmClient(ref.port, a.mib), TvmClient(ours.port, a.mib)]
        for c in tc:
            c.calls(200)
        tvm_t = alternate(a.rounds, [lambda c=c: c.calls(a.calls) for c in tc])
        up = alternate(a.copy_rounds, [c.upload for c in tc])
        down = alternate(a.copy_rounds, [c.download for c in tc])
        for c in tc:
            c.close()
    finally:
        ref.close()
        ours.close()
        echo.kill()
        echo.wait()
    load1 = os.getloadavg()

    def ratios(pair):
        return [o / r for r, o in zip(*pair)]

    print(f"Load average (1, 5, 15 min) at the start: {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}; "
          f"at the end: {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}")
    print()
    print("| measure (median of the rounds) | reference server | ours | ours / reference, median of rounds (range) |")
    print("|---|---|---|---|")
    for name, pair in [("raw-socket client", raw_t[:2]), ("TVM's Python client", tvm_t)]:
        rs = ratios(pair)
        print(f"| round trip of an empty call, {name} (us) | {med(pair[0]) * 1e6:.1f} | "
              f"{med(pair[1]) * 1e6:.1f} | {med(rs):.2f}x time ({min(rs):.2f}..{max(rs):.2f}) |")
    rs = ratios((raw_t[0], raw_t[2]))
    print(f"| floor: do-nothing echo server (rpc_echo.c), raw-socket client (us) | "
          f"{med(raw_t[0]) * 1e6:.1f} | {med(raw_t[2]) * 1e6:.1f} (echo) | "
          f"{med(rs):.2f}x time ({min(rs):.2f}..{max(rs):.2f}): the lowest ratio any server reaches |")
    for name, pair in [("upload", up), ("download", down)]:
        rs = [r / o for r, o in zip(*pair)]
        print(f"| {a.mib} MiB {name} (MiB/s) | {a.mib / med(pair[0]):.0f} | {a.mib / med(pair[1]):.0f} | "
              f"{med(rs):.2f}x bandwidth ({min(rs):.2f}..{max(rs):.2f}) |")


if __name__ == "__main__":
    main()
