"""pytest configuration: checks that TVM runs in runtime-only mode on the chosen
libtvm_runtime.so (never on libtvm.so, the full compiler), and says which library it is.

Run through scripts/run_python_tests.sh ours|ref, or by hand:
    TVM_LIBRARY_PATH=<dir holding only libtvm_runtime.so> TVM_USE_RUNTIME_LIB=1 TVM_FFI=ctypes \
        python -m pytest tests/python -q
"""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

_MISSING = [k for k in ("TVM_LIBRARY_PATH", "TVM_USE_RUNTIME_LIB") if not os.environ.get(k)]
if _MISSING:
    pytest.exit(
        f"tests/python: {', '.join(_MISSING)} not set; run scripts/run_python_tests.sh ours|ref",
        returncode=2,
    )
os.environ.setdefault("TVM_FFI", "ctypes")


def _mapped_libraries():
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and parts[5].startswith("/"):
                libs.add(parts[5])
    return libs


import tvm  # noqa: E402  (needs the environment above)
from tvm._ffi import base as _base  # noqa: E402

import tvmrt_helpers as H  # noqa: E402

_problems = []
if os.path.basename(_base._LIB._name) != "libtvm_runtime.so":
    _problems.append(f"TVM loaded {_base._LIB._name}, not a libtvm_runtime.so")
if not _base._RUNTIME_ONLY:
    _problems.append("TVM is not in runtime-only mode")
_full = sorted(p for p in _mapped_libraries() if os.path.basename(p) == "libtvm.so")
if _full:
    _problems.append(f"the full compiler is mapped into the process: {_full}")
_dirs = [os.path.realpath(d) for d in os.environ["TVM_LIBRARY_PATH"].split(os.pathsep) if d]
_loaded_from = os.path.dirname(os.path.abspath(_base._LIB._name))
if os.path.realpath(_loaded_from) not in _dirs:
    _problems.append(
        f"TVM loaded {_base._LIB._name}, which is not in TVM_LIBRARY_PATH ({_dirs}): "
        "no libtvm_runtime.so there?"
    )
_expect = os.environ.get("TVMRT_EXPECT_LIB")
if _expect and not os.path.samefile(H.LOADED_LIB, _expect):
    _problems.append(f"TVM loaded {H.LOADED_LIB}, expected {_expect}")
if _problems:
    pytest.exit("tests/python: wrong runtime library:\n  " + "\n  ".join(_problems), returncode=3)

_HEADER = (
    f"tvm runtime under test: {H.WHICH} = {H.LOADED_LIB}"
    + (f" (from {os.environ['TVMRT_LIB_SOURCE']})" if os.environ.get("TVMRT_LIB_SOURCE") else "")
    + " "
    f"(tvm {tvm.__version__}, runtime-only, ffi ctypes); fixtures: {H.FIXTURES}"
)


def pytest_report_header(config):
    return _HEADER


def pytest_sessionstart(session):
    # The report header is hidden under -q; print the library there too.
    if session.config.getoption("verbose") < 0:
        tr = session.config.pluginmanager.get_plugin("terminalreporter")
        if tr is not None:
            tr.write_line(_HEADER)


def _skip_reason(report):
    r = report.longrepr
    if isinstance(r, tuple) and len(r) == 3:
        return str(r[2]).removeprefix("Skipped: ")
    return str(r)


def _log_skip(report):
    """Every skip of the run (H.skip, a skipif mark, pytest.skip anywhere) goes to
    $TVMRT_SKIP_LOG, as tests/common/skip.rs does for the Rust tests, so that the test
    command's summary counts and lists it (pytest's own summary lists them too: -rs)."""
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    line = f"skipped: python[{H.WHICH}]::{report.nodeid}: {_skip_reason(report)}"
    log = os.environ.get("TVMRT_SKIP_LOG")
    if log:
        with open(log, "a") as f:
            f.write(line + "\n")


def pytest_runtest_logreport(report):
    _log_skip(report)


def pytest_collectreport(report):
    _log_skip(report)
