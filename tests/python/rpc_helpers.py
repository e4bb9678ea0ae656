"""Helpers for the RPC tests: servers and trackers in subprocesses, on loopback only, each with
a bounded lifetime so that nothing outlives the test run."""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import tvmrt_helpers as H

HOST = "127.0.0.1"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# A process started here dies after this many seconds even if a test forgets it.
LIFETIME = 180


def _first(paths):
    for p in paths:
        if p and os.path.isfile(p):
            return p
    return None


def tvmrt_bin():
    """Our `tvmrt` binary, or a skip (a failure under TVMRT_REQUIRE_FIXTURES: the test command
    builds it)."""
    p = _first(
        [
            os.environ.get("TVMRT_BIN"),
            os.path.join(ROOT, "target", "release", "tvmrt"),
            os.path.join(ROOT, "target", "debug", "tvmrt"),
        ]
    )
    if p is None:
        H.skip("no tvmrt binary built (cargo build --release)", H.REQUIRE_FIXTURES)
    return p


def lib_dir(which, tmp_path_factory):
    """A directory holding only the chosen libtvm_runtime.so ('ours' or 'ref'), or a skip (a
    failure under TVMRT_REQUIRE_FIXTURES: the test command builds ours and installs the
    reference)."""
    if which == "ref":
        src = H.REF_LIB
    else:
        src = _first(
            [
                os.environ.get("TVMRT_OUR_LIB"),
                H.LOADED_LIB if H.IS_OURS else None,
                os.path.join(ROOT, "target", "release", "libtvm_runtime.so"),
            ]
        )
    if src is None or not os.path.isfile(src):
        H.skip(f"no {which} libtvm_runtime.so available", H.REQUIRE_FIXTURES)
    d = tmp_path_factory.mktemp(f"lib_{which}")
    shutil.copy(src, d / "libtvm_runtime.so")
    return str(d)


def _env_for(libdir):
    env = dict(os.environ)
    env.update(
        {
            "TVM_LIBRARY_PATH": libdir,
            "TVM_USE_RUNTIME_LIB": "1",
            "TVM_FFI": "ctypes",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
    )
    return env


class Proc:
    """A subprocess with a port read from its output; stopped on close()."""

    def __init__(self, args, env=None, pattern=r"bind to [\d.]+:(\d+)", timeout=60):
        # Append mode: the child shares this file's offset, which output() moves back to 0
        # while the child may be writing.
        self.log = tempfile.TemporaryFile(mode="a+")
        self.p = subprocess.Popen(
            args, env=env, stdout=self.log, stderr=subprocess.STDOUT, text=True
        )
        deadline = time.time() + timeout
        self.port = None
        while time.time() < deadline:
            self.log.seek(0)
            m = re.search(pattern, self.log.read())
            if m:
                self.port = int(m.group(1))
                break
            if self.p.poll() is not None:
                break
            time.sleep(0.1)
        if self.port is None:
            out = self.output()
            self.close()
            raise AssertionError(f"{args[0]} did not start:\n{out}")

    def output(self):
        self.log.seek(0)
        return self.log.read()

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait(timeout=10)

    def close(self):
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(timeout=10)
        self.log.close()


_PY_SERVER = r"""
import multiprocessing, sys, time
multiprocessing.set_start_method("fork", force=True)
import tvm, tvm.rpc
port, key, tracker, life = int(sys.argv[1]), sys.argv[2], sys.argv[3], float(sys.argv[4])
kw = {}
if tracker:
    h, p = tracker.split(":")
    kw["tracker_addr"] = (h, int(p))
s = tvm.rpc.Server(host="127.0.0.1", port=port, port_end=port + 200, key=key, **kw)
print("bind to 127.0.0.1:%d" % s.port, flush=True)
time.sleep(life)
s.terminate()
"""


def python_server(libdir, key="", tracker="", port=9400):
    """TVM's Python `tvm.rpc.Server` in a subprocess on the runtime in `libdir`."""
    return Proc(
        [sys.executable, "-c", _PY_SERVER, str(port), key, tracker, str(LIFETIME)],
        env=_env_for(libdir),
    )


def tvmrt_server(*extra, port=9600):
    """Our `tvmrt rpc-server` in a subprocess."""
    return Proc(
        [
            tvmrt_bin(),
            "rpc-server",
            "--port",
            str(port),
            "--port-end",
            str(port + 200),
            "--lifetime",
            str(LIFETIME),
            *extra,
        ]
    )


def tracker(port=9190):
    """TVM's Python tracker in a subprocess."""
    return Proc(
        [
            sys.executable,
            "-m",
            "tvm.exec.rpc_tracker",
            "--host",
            HOST,
            "--port",
            str(port),
            "--port-end",
            str(port + 200),
        ],
        env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"),
        pattern=r"bind to [\d.]+:(\d+)",
    )
