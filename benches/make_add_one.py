"""Compiles the kernel-call benchmark's module with the reference TVM compiler (the hhb-tvm
wheel that scripts/setup.sh installs into $TVMRT_PYTHON's environment):

    myadd(A, B, C): C[i] = A[i] + B[i], float32, n = 1   ->   <out>.so (exported library)

scripts/bench.sh runs it only when $TVMRT_CACHE/fixtures/add_one.so (the project's fixture,
the same function) is missing; it writes to build/bench/, never to the fixtures directory.

    python benches/make_add_one.py OUT.so
"""
import platform
import sys

import tvm
from tvm import te


def main(out):
    n = 1
    a = te.placeholder((n,), name="A", dtype="float32")
    b = te.placeholder((n,), name="B", dtype="float32")
    c = te.compute((n,), lambda i: a[i] + b[i], name="C")
    s = te.create_schedule(c.op)
    # The wheel's compiler defaults to RISC-V (HHB); ask for this machine explicitly.
    target = f"llvm -mtriple={platform.machine()}-linux-gnu"
    f = tvm.build(s, [a, b, c], target, name="myadd")
    f.export_library(out)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_add_one.py OUT.so")
    main(sys.argv[1])
