#!/usr/bin/env python3
"""Side-by-side benchmark of the language-model paths on the reference runtime and ours, in one
run, through TVM's Python client in runtime-only mode (one child process per measurement,
alternating which runtime goes first from round to round):

  - loading a parameter cache of 256 MB (16 float32 arrays of 2048 x 2048, written here with
    tvm.contrib.tvmjs.dump_ndarray_cache into a temporary directory, 32 MB shards): the time
    of one load (median over the rounds), and the growth of the child's peak RSS (VmHWM after
    the load minus VmRSS before it; the largest over the rounds);
  - the decoder fixture (scripts/build_llm_fixtures.py): one decode step's latency (median of
    64 steps, the Python call of `decode` with its argument conversion) and the tokens/s of a
    64-token greedy generation (argmax on the host included), medians over the rounds. Here the
    Python client dominates; scripts/bench_llm.sh measures the same steps through the C API.

    $TVMRT_PYTHON scripts/bench_llm.py OURS_LIB_DIR [--rounds N] [--only load|decode]

OURS_LIB_DIR holds our libtvm_runtime.so (e.g. target/release); the reference is $TVMRT_REF_LIB.
Prints ratios ours / reference (lower is better) and the load average before and after.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

CHILD = r"""
import json, os, sys, time
import numpy as np
import tvm
mode, arg = sys.argv[1], sys.argv[2]
def status_kb(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1])
if mode == "load":
    load = tvm.get_global_func("vm.builtin.ndarray_cache.load")
    before = status_kb("VmRSS")
    t = time.perf_counter(); load(arg, 1, 0); dt = time.perf_counter() - t
    print(json.dumps({"load_s": dt, "peak_rss_mb": (status_kb("VmHWM") - before) / 1024}))
else:
    from tvm.runtime import relax_vm
    meta = json.load(open(os.path.join(arg, "meta.json")))
    vm = relax_vm.VirtualMachine(tvm.runtime.load_module(os.path.join(arg, "decoder.so")), tvm.cpu())
    tvm.get_global_func("vm.builtin.ndarray_cache.load")(os.path.join(arg, "params"), 1, 0)
    params = list(tvm.get_global_func("vm.builtin.param_array_from_cache_by_name")(meta["param_names"]))
    def run(n):
        eff = vm["_initialize_effect"]()
        prompt = [1, 2, 3]
        out = vm["prefill"](tvm.nd.array(np.array([prompt], "int32")), tvm.runtime.ShapeTuple([3]), *eff, *params)
        total, steps = 3, []
        t0 = time.perf_counter()
        for _ in range(n):
            tok = int(np.argmax(out[0].numpy()[0, -1]))
            total += 1
            t = time.perf_counter()
            out = vm["decode"](tvm.nd.array(np.array([[tok]], "int32")), tvm.runtime.ShapeTuple([total]), *out[1], *params)
            steps.append(time.perf_counter() - t)
        return steps, time.perf_counter() - t0
    run(8)
    steps, total = run(64)
    print(json.dumps({"decode_step_ms": float(np.median(steps)) * 1e3, "tokens_per_s": 64 / total}))
"""


def child(lib_dir, mode, arg):
    env = dict(os.environ, TVM_LIBRARY_PATH=lib_dir, TVM_USE_RUNTIME_LIB="1", TVM_FFI="ctypes",
               TVM_NUM_THREADS=os.environ.get("TVM_NUM_THREADS", "1"))
    out = subprocess.run([sys.executable, "-c", CHILD, mode, arg], env=env, check=True,
                         capture_output=True, text=True, timeout=600)
    return json.loads(out.stdout.strip().splitlines()[-1])


def rounds_of(dirs, mode, arg, rounds):
    """{runtime: [result per round]}, alternating which runtime goes first."""
    res = {w: [] for w in dirs}
    for r in range(rounds):
        order = list(dirs) if r % 2 == 0 else list(dirs)[::-1]
        for w in order:
            res[w].append(child(dirs[w], mode, arg))
    return res


def main():
    import argparse
    import statistics as st

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ours_lib_dir")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", choices=["load", "decode"])
    a = ap.parse_args()
    ours = os.path.abspath(a.ours_lib_dir)
    ref_lib = os.environ["TVMRT_REF_LIB"]
    cache = os.environ.get("TVMRT_CACHE", os.path.expanduser("~/.cache/tvm-runtime-rs"))
    fixture = os.path.join(cache, "fixtures", "llm")
    load_before = open("/proc/loadavg").read().split()[:3]
    tmp = tempfile.mkdtemp(prefix="tvmrt-bench-llm.")
    try:
        dirs = {"ref": os.path.join(tmp, "ref"), "ours": os.path.join(tmp, "ours")}
        for d in dirs.values():
            os.makedirs(d)
        os.symlink(ref_lib, os.path.join(dirs["ref"], "libtvm_runtime.so"))
        shutil.copy(os.path.join(ours, "libtvm_runtime.so"), dirs["ours"])
        rows = []
        med = lambda res, w, k: st.median(x[k] for x in res[w])
        if a.only in (None, "load"):
            import numpy as np
            from tvm.contrib import tvmjs

            rng = np.random.default_rng(0)
            params = {f"w_{i}": rng.standard_normal((2048, 2048)).astype("float32") for i in range(16)}
            weights = os.path.join(tmp, "weights")
            tvmjs.dump_ndarray_cache(params, weights, encode_format="raw", shard_cap_mb=32)
            del params
            r = rounds_of(dirs, "load", weights, a.rounds)
            rows.append(("load 256 MB cache (ms)", med(r, "ref", "load_s") * 1e3, med(r, "ours", "load_s") * 1e3,
                         "<= 0.5"))
            rss = {w: max(x["peak_rss_mb"] for x in r[w]) for w in dirs}
            rows.append(("load peak RSS growth (MB)", rss["ref"], rss["ours"], "<= 1.0"))
        if a.only in (None, "decode"):
            if os.path.isfile(os.path.join(fixture, "stamp")):
                r = rounds_of(dirs, "decode", fixture, a.rounds)
                rows.append(("decode step (ms, median)", med(r, "ref", "decode_step_ms"),
                             med(r, "ours", "decode_step_ms"), "(target: bench_llm.sh)"))
                rows.append(("64-token greedy (tokens/s)", med(r, "ref", "tokens_per_s"),
                             med(r, "ours", "tokens_per_s"), ""))
            else:
                print(f"skipped: decode benchmark, no fixture in {fixture}")
        print(f"rounds {a.rounds}; loadavg before {' '.join(load_before)}, "
              f"after {' '.join(open('/proc/loadavg').read().split()[:3])}")
        print(f"{'':30} {'reference':>12} {'ours':>12} {'ours/ref':>9}  target")
        for name, x, y, target in rows:
            print(f"{name:30} {x:12.3f} {y:12.3f} {y / x if x else float('nan'):9.3f}  {target}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
