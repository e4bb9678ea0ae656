#!/usr/bin/env python3
"""Runs the board fixtures of scripts/build_cross_fixtures.py on our runtime: `tvmrt run`,
cross-built for the board, under qemu-user, and compares every output with the x86-64
reference runtime's output for the same model compiled for x86-64, within the tolerance the
fixture states (cross.json; the arithmetic behind each is in build_cross_fixtures.py).

    scripts/run_cross_fixtures.py --dir $TVMRT_CACHE/fixtures-aarch64 \\
        --tvmrt target/cross/aarch64-unknown-linux-gnu/quick/tvmrt \\
        --runner "qemu-aarch64 -L /usr/aarch64-linux-gnu" [NAME ...]

NAME: fixtures to run (default: all of cross.json). Needs numpy only (no TVM). Prints one
line per call: the largest absolute difference, the largest difference in units of the
tolerance (<= 1 passes), the wall time. Exit status 1 when any output is off or a run fails.
"""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

import numpy as np


def compare(got, want, rtol, atol):
    """(max |got - want|, max |got - want| / (atol + rtol |want|), equal shapes/dtypes)"""
    if got.shape != want.shape or got.dtype != want.dtype:
        return None
    if got.dtype.kind in "biu":
        d = np.abs(got.astype(np.int64) - want.astype(np.int64))
        return int(d.max(initial=0)), float("inf") if d.any() else 0.0
    g, w = got.astype(np.float64), want.astype(np.float64)
    if np.isnan(g).any():
        return float("nan"), float("inf")
    d = np.abs(g - w)
    bound = atol + rtol * np.abs(w)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(d == 0, 0.0, d / bound)
    return float(d.max(initial=0)), float(ratio.max(initial=0))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", required=True, help="a fixtures-<arch> directory")
    ap.add_argument("--tvmrt", required=True, help="tvmrt built for the board")
    ap.add_argument("--runner", default="", help="the emulator command line (qemu-<arch> -L "
                    "<sysroot>); empty on the board itself")
    ap.add_argument("names", nargs="*")
    args = ap.parse_args()
    with open(os.path.join(args.dir, "cross.json")) as fh:
        manifest = json.load(fh)
    names = args.names or list(manifest)
    unknown = [n for n in names if n not in manifest]
    if unknown:
        print(f"run_cross_fixtures: not in {args.dir}/cross.json: {', '.join(unknown)}")
        return 2
    runner = shlex.split(args.runner)
    failures = []
    for name in names:
        e = manifest[name]
        npy = os.path.join(args.dir, e["npy_dir"])
        for c in e["calls"]:
            cmd = runner + [args.tvmrt, "run", os.path.join(args.dir, e["file"]),
                            "--repeat", "1"]
            if e["kind"] == "relax":
                cmd += ["--function", c["function"]]
            for p, k in c["inputs"].items():
                cmd += ["--input", f"{p}={os.path.join(npy, k + '.npy')}"]
            label = f"{name}:{c['function']}"
            with tempfile.TemporaryDirectory(prefix="tvmrt-cross-out-") as out:
                t0 = time.time()
                r = subprocess.run(cmd + ["--output", out], capture_output=True, text=True)
                dt = time.time() - t0
                if r.returncode != 0:
                    print(f"FAIL {label}: tvmrt exited {r.returncode}\n  {shlex.join(cmd)}\n"
                          + r.stdout[-2000:] + r.stderr[-2000:])
                    failures.append(label)
                    continue
                worst, detail = 0.0, []
                for i, k in enumerate(c["outputs"]):
                    path = os.path.join(out, f"output_{i}.npy")
                    want = np.load(os.path.join(npy, k + ".npy"))
                    if not os.path.exists(path):
                        detail.append(f"{k}: no output_{i}")
                        worst = float("inf")
                        continue
                    res = compare(np.load(path), want, c["rtol"], c["atol"])
                    if res is None:
                        got = np.load(path)
                        detail.append(f"{k}: got {got.dtype}{list(got.shape)}, want "
                                      f"{want.dtype}{list(want.shape)}")
                        worst = float("inf")
                        continue
                    diff, ratio = res
                    worst = max(worst, ratio) if ratio == ratio else float("inf")
                    detail.append(f"{k}: max |diff| {diff:.3g}")
                if os.path.exists(os.path.join(out, f"output_{len(c['outputs'])}.npy")):
                    detail.append("more outputs than expected")
                    worst = float("inf")
                for k in c.get("shape_outputs", []):
                    want = [int(v) for v in np.load(os.path.join(npy, k + ".npy"))]
                    m = re.search(r"^output 0: shape \[([0-9, ]*)\]", r.stdout, re.M)
                    got = [int(v) for v in m.group(1).split(",")] if m else None
                    detail.append(f"{k}: shape {got}")
                    if got != want:
                        detail.append(f"want {want}")
                        worst = float("inf")
            ok = worst <= 1.0
            tol = f"rtol {c['rtol']:g} atol {c['atol']:g}"
            print(f"{'ok  ' if ok else 'FAIL'} {label:<28} {'; '.join(detail)}; "
                  f"{worst:.3g} of the tolerance ({tol}); {dt:.1f} s")
            if not ok:
                failures.append(label)
    total = sum(len(manifest[n]["calls"]) for n in names)
    print(f"run_cross_fixtures: {total - len(failures)} of {total} calls within tolerance in "
          f"{args.dir}" + (f"; failed: {', '.join(failures)}" if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
