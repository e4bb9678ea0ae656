"""Soak: PackedFunc callbacks from C into Python and back, on the runtime TVM's Python package
loaded (scripts/soak.sh runs it on ours). The packed_call fixture is a compiled kernel that
looks up the global function tvmrt_test.add_scalar and calls it through the C API; here that
function is a Python function, so each call goes Python -> kernel (C) -> runtime -> Python ->
back. Every output is checked; RSS and open fds must stay flat after the warm-up.

    python soak_callbacks.py FIXTURES_DIR CALLS [RSS_SLACK_KB]
"""
import os
import sys

import numpy as np
import tvm


def rss_kb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def fds():
    return len(os.listdir("/proc/self/fd"))


def main():
    fixtures, calls = sys.argv[1], int(sys.argv[2])
    slack = int(sys.argv[3]) if len(sys.argv) > 3 else 8192
    lib = tvm.runtime.load_module(os.path.join(fixtures, "packed_call.so"))
    kernel = lib["call_packed"]
    seen = {"n": 0}

    def add_scalar(a, b, c):
        seen["n"] += 1
        b.copyfrom(a.numpy() + np.float32(c))

    tvm.register_func("tvmrt_test.add_scalar", add_scalar, override=True)
    a = tvm.nd.empty((16,), "float32")
    b = tvm.nd.empty((16,), "float32")
    base = np.arange(16, dtype="float32")
    warm = calls // 5
    samples = []
    for i in range(calls):
        x = base * np.float32(i % 97) - np.float32(i % 13)
        a.copyfrom(x)
        kernel(a, b)
        got = b.numpy()
        if not np.array_equal(got, x + np.float32(3.0)):
            print(f"soak_callbacks: FAILED: call {i}: got {got}, expected {x + 3}")
            return 1
        if i >= warm and (i % 100 == 0 or i + 1 == calls):
            samples.append((rss_kb(), fds()))
    if seen["n"] != calls:
        print(f"soak_callbacks: FAILED: the callback ran {seen['n']} times, not {calls}")
        return 1
    first = samples[0][0]
    peak = max(s[0] for s in samples)
    fd_set = sorted({s[1] for s in samples})
    print(f"callbacks: {calls} calls C -> Python -> C, every output checked; RSS after warm-up "
          f"{first} KiB, peak {peak} KiB (growth {peak - first} KiB); open fds {fd_set}")
    if peak > first + slack:
        print(f"soak_callbacks: FAILED: RSS grew by {peak - first} KiB (allowed {slack})")
        return 1
    if len(fd_set) != 1:
        print(f"soak_callbacks: FAILED: open fds changed: {fd_set}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
