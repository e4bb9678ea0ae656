#!/usr/bin/env python3
"""Side-by-side benchmark of the language-model paths on the reference runtime and ours, in one
run, through TVM's Python client in runtime-only mode (one child process per measurement):

  - loading a parameter cache of about 256 MB (16 float32 arrays, written here with
    tvm.contrib.tvmjs.dump_ndarray_cache into a temporary directory): best wall time of 3
    loads, and the child's peak RSS after one load (minus its RSS before the load);
  - the decoder fixture (scripts/build_llm_fixtures.py): one decode step's latency (median of
    64) and the tokens/s of a 64-token greedy generation.

    $TVMRT_PYTHON scripts/bench_llm.py OURS_LIB_DIR

OURS_LIB_DIR holds our libtvm_runtime.so (e.g. target/release); the reference is $TVMRT_REF_LIB.
Prints ratios ours / reference (lower is better).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

CHILD = r"""
import json, os, resource, sys, time
import numpy as np
import tvm
mode, arg = sys.argv[1], sys.argv[2]
def rss_kb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1])
if mode == "load":
    load = tvm.get_global_func("vm.builtin.ndarray_cache.load")
    clear = tvm.get_global_func("vm.builtin.ndarray_cache.clear")
    before = rss_kb()
    t = time.perf_counter(); load(arg, 1, 0); first = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    times = [first]
    for _ in range(2):
        clear(); t = time.perf_counter(); load(arg, 1, 0); times.append(time.perf_counter() - t)
    print(json.dumps({"load_s": min(times), "peak_rss_mb": (peak - before) / 1024}))
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
    env = dict(os.environ, TVM_LIBRARY_PATH=lib_dir, TVM_USE_RUNTIME_LIB="1", TVM_FFI="ctypes")
    out = subprocess.run([sys.executable, "-c", CHILD, mode, arg], env=env, check=True,
                         capture_output=True, text=True, timeout=600)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    ours = os.path.abspath(sys.argv[1])
    ref_lib = os.environ["TVMRT_REF_LIB"]
    cache = os.environ.get("TVMRT_CACHE", os.path.expanduser("~/.cache/tvm-runtime-rs"))
    fixture = os.path.join(cache, "fixtures", "llm")
    tmp = tempfile.mkdtemp(prefix="tvmrt-bench-llm.")
    try:
        ref_dir = os.path.join(tmp, "ref")
        ours_dir = os.path.join(tmp, "ours")
        os.makedirs(ref_dir)
        os.makedirs(ours_dir)
        os.symlink(ref_lib, os.path.join(ref_dir, "libtvm_runtime.so"))
        shutil.copy(os.path.join(ours, "libtvm_runtime.so"), ours_dir)
        import numpy as np
        from tvm.contrib import tvmjs

        rng = np.random.default_rng(0)
        params = {f"w_{i}": rng.standard_normal((2048, 2048)).astype("float32") for i in range(16)}
        weights = os.path.join(tmp, "weights")
        tvmjs.dump_ndarray_cache(params, weights, encode_format="raw", shard_cap_mb=32)
        del params
        rows = []
        r = {w: child(d, "load", weights) for w, d in (("ref", ref_dir), ("ours", ours_dir))}
        rows.append(("load 256 MB cache (s)", r["ref"]["load_s"], r["ours"]["load_s"]))
        rows.append(("load peak RSS growth (MB)", r["ref"]["peak_rss_mb"], r["ours"]["peak_rss_mb"]))
        if os.path.isfile(os.path.join(fixture, "stamp")):
            r = {w: child(d, "decode", fixture) for w, d in (("ref", ref_dir), ("ours", ours_dir))}
            rows.append(("decode step (ms, median)", r["ref"]["decode_step_ms"], r["ours"]["decode_step_ms"]))
            rows.append(("64-token greedy (tokens/s)", r["ref"]["tokens_per_s"], r["ours"]["tokens_per_s"]))
        else:
            print(f"skipped: decode benchmark, no fixture in {fixture}")
        print(f"{'':30} {'reference':>12} {'ours':>12} {'ours/ref':>9}")
        for name, a, b in rows:
            print(f"{name:30} {a:12.3f} {b:12.3f} {b / a if a else float('nan'):9.2f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
