"""Shared helpers for the Python suite (imported by conftest.py and the test modules).

The suite runs TVM's own Python package (hhb-tvm 3.2.3, TVM 0.16.dev0) in runtime-only mode on
one libtvm_runtime.so: the reference or ours. Importing this module imports tvm, so the
environment (TVM_LIBRARY_PATH, TVM_USE_RUNTIME_LIB=1, TVM_FFI=ctypes) must be set before; see
scripts/run_python_tests.sh.
"""

import filecmp
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import tvm
from tvm._ffi import base as _base

CACHE = os.environ.get("TVMRT_CACHE", os.path.expanduser("~/.cache/tvm-runtime-rs"))
REF_LIB = os.environ.get("TVMRT_REF_LIB", os.path.join(CACHE, "wheel", "tvm", "libtvm_runtime.so"))
FIXTURES = os.environ.get("TVMRT_FIXTURES", os.path.join(CACHE, "fixtures"))
# The switches that turn a skip into a failure (the test command sets them).
REQUIRE_FIXTURES = "TVMRT_REQUIRE_FIXTURES"
REQUIRE_MODELS = "TVMRT_REQUIRE_MODELS"

LOADED_LIB = os.path.realpath(_base._LIB._name)
TVM_VERSION = tvm.__version__


def _which():
    w = os.environ.get("TVMRT_WHICH")
    if w in ("ours", "ref"):
        return w
    # the same file, or a copy of it (site-packages/tvm holds one)
    try:
        same = os.path.samefile(LOADED_LIB, REF_LIB) or filecmp.cmp(LOADED_LIB, REF_LIB, False)
    except OSError:
        same = False
    return "ref" if same else "ours"


WHICH = _which()
IS_OURS = WHICH == "ours"


def skip(why, require=None):
    """The suite's one way to skip a test that cannot run here (the Python twin of
    tests/common/skip.rs). With `require` (a `TVMRT_REQUIRE_*` switch: FIXTURES, MODELS, VULKAN,
    CUDA) set in the environment the test fails instead. conftest.py writes every skip of the
    run, whatever raised it, to `$TVMRT_SKIP_LOG`, which the test command's summary counts."""
    __tracebackhide__ = True  # pytest reports the caller's line
    if require and os.environ.get(require):
        pytest.fail(f"{require} is set, but this test cannot run: {why}", pytrace=False)
    pytest.skip(why)


def xfail_ours(reason):
    """A strict xfail that applies only when the suite runs on our runtime.

    On the reference the test must pass; on ours it must fail (strict: when ours gets fixed the
    test XPASSes, which fails the run, so the mark gets removed)."""
    return pytest.mark.xfail(IS_OURS, reason="ours: " + reason, strict=True)


# ---------------------------------------------------------------------------------------------
# Fixtures built by scripts/build_fixtures.py (manifest.json describes them).


def manifest():
    path = os.path.join(FIXTURES, "manifest.json")
    if not os.path.isfile(path):
        skip(f"no fixtures: {path} is missing (run scripts/build_fixtures.py)", REQUIRE_FIXTURES)
    with open(path) as f:
        return json.load(f)


def fixture_entry(name, require=None):
    """(manifest entry, path of the library, loaded expected arrays or None); skips when the
    fixture is not there, or fails under `require` (default TVMRT_REQUIRE_FIXTURES)."""
    require = require or REQUIRE_FIXTURES
    m = manifest()
    if name not in m:
        skip(f"fixture {name!r} is not in {FIXTURES}/manifest.json", require)
    entry = m[name]
    lib = os.path.join(FIXTURES, entry["file"])
    if not os.path.isfile(lib):
        skip(f"fixture file {lib} is missing", require)
    expected = None
    if entry.get("expected"):
        npz = os.path.join(FIXTURES, entry["expected"])
        if not os.path.isfile(npz):
            skip(f"fixture data {npz} is missing", require)
        with np.load(npz) as z:
            expected = {k: z[k] for k in z.files}
    return entry, lib, expected


def fixture_function(entry, name):
    if name not in entry.get("functions", {}):
        skip(f"the manifest lists no function {name!r} for {entry['file']}", REQUIRE_FIXTURES)
    return name


# ---------------------------------------------------------------------------------------------
# Arrays


def aligned_numpy(shape, dtype, alignment=64, fill=None):
    """A C-contiguous numpy array whose data starts on an `alignment` boundary (TVM's
    TVMArrayFromDLPack requires 64-byte alignment; numpy only guarantees 16)."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    buf = np.zeros(nbytes + alignment, dtype=np.uint8)
    off = (-buf.ctypes.data) % alignment
    # np.ndarray(buffer=, offset=) keeps the offset even for zero-size arrays (slicing would
    # reset their data pointer to the start of the buffer)
    arr = np.ndarray(shape, dtype, buffer=buf, offset=off)
    if fill is not None:
        arr[...] = fill
    assert arr.ctypes.data % alignment == 0 and arr.flags["C_CONTIGUOUS"]
    return arr


def data_ptr(nd):
    """Address of the first element of a tvm NDArray."""
    t = nd.handle.contents
    return (t.data or 0) + t.byte_offset


# ---------------------------------------------------------------------------------------------
# Subprocesses (for behaviour fixed at library load, e.g. the thread count)


def run_python(code, env_update=None, env_remove=(), timeout=60):
    """Runs `code` in a fresh interpreter on the same runtime library; returns stdout."""
    env = dict(os.environ)
    for k in env_remove:
        env.pop(k, None)
    env.update(env_update or {})
    p = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if p.returncode != 0:
        raise AssertionError(f"subprocess failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p.stdout
