#!/usr/bin/env python3
"""Builds the model fixtures for the boards (aarch64, armv7, riscv64) with the reference TVM
compiler, and beside each one the x86-64 reference runtime's outputs for the same model compiled
for x86-64: what scripts/run_cross_fixtures.py compares our runtime's outputs with, under qemu.

    source scripts/env.sh
    $TVMRT_PYTHON scripts/build_cross_fixtures.py [--arch aarch64|armv7|riscv64 ...] [--models]
                                                  [--force]

The models are those of scripts/build_fixtures.py (its Builder's definitions, inputs and
seeds, imported from it): the graph models mlp, mlp_linked and conv and the Relax models
relax_mlp, relax_mlp_dyn, relax_control, relax_multi, relax_chain ("core"), and with --models
resnet18 and mobilenet as graph libraries and as Relax executables (relax_resnet18,
relax_mobilenet, converted by relay_translator.from_relay for each target). Each is compiled
once for x86-64 (the target build_fixtures.py uses) and run on the reference runtime in this
process, which gives the expected outputs; then compiled for each board's target and
cross-linked with the board's gcc (Debian's cross compilers, scripts/cross_setup.sh).

Output, per board: $TVMRT_CACHE/fixtures-<arch>/, <arch> as Rust names it (aarch64, arm,
riscv64): NAME.so for the board, NAME/KEY.npy (the inputs and the x86-64 expected outputs) and
cross.json (what run_cross_fixtures.py runs: the library, the calls, the npy keys, the
tolerance and its reason, the targets, the compile time). It is not a manifest.json: the
Rust tests look for the full x86-64 fixture set there and keep reporting skips.

Cached like build_fixtures.py: <dir>/stamp records this script's SHA-256 and the groups built;
a run whose groups are stamped (and whose files are there) compiles nothing.

Targets (the reference compiler is hhb-tvm, TVM 0.16.dev0):
  aarch64  llvm -mtriple=aarch64-linux-gnu -mattr=+neon
  armv7    llvm -mtriple=armv7l-linux-gnueabihf -mattr=+neon -mfloat-abi=hard
           (-mfloat-abi=hard: the import blob's object, devc.o, is emitted from the target
           string; without it it is soft-float and the hard-float link refuses it)
  riscv64  llvm -mtriple=riscv64-unknown-linux-gnu -mcpu=generic-rv64
           -mattr=+64bit,+m,+a,+f,+d,+c -mabi=lp64d, built with tir.disable_vectorize (this
           fork's RISC-V codegen emits scalable vectors that LLVM cannot legalize for rv64gc)
TOPHUB_LOCATION=NONE: the compiler would try to download tuning logs.
"""
import argparse
import fcntl
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time

os.environ["TOPHUB_LOCATION"] = "NONE"
os.environ.setdefault("TVM_FFI", "ctypes")  # this wheel has no Cython core

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import build_fixtures as bf  # noqa: E402

HERE = os.path.abspath(__file__)

# arch -> (Rust's name for the directory, gcc prefix, target, PassContext config)
ARCHES = {
    "aarch64": ("aarch64", "aarch64-linux-gnu",
                "llvm -mtriple=aarch64-linux-gnu -mattr=+neon", {}),
    "armv7": ("arm", "arm-linux-gnueabihf",
              "llvm -mtriple=armv7l-linux-gnueabihf -mattr=+neon -mfloat-abi=hard", {}),
    "riscv64": ("riscv64", "riscv64-linux-gnu",
                "llvm -mtriple=riscv64-unknown-linux-gnu -mcpu=generic-rv64 "
                "-mattr=+64bit,+m,+a,+f,+d,+c -mabi=lp64d", {"tir.disable_vectorize": True}),
}
GROUPS = ("core", "models")

# Tolerances, per element: |ours on the board - reference on x86-64| <= atol + rtol * |ref|.
#
# The board's code and x86-64's come from the same Relay/Relax program, but the kernels are
# compiled for other vector widths (NEON 4 lanes, AVX2 8, RISC-V scalar here), with or without
# FMA contraction, and with other schedules: every reduction (dense, conv2d, the softmax's sum)
# adds its terms in another order. In float32 (unit roundoff u = 2^-24 = 6.0e-8) two orders of
# a K-term sum differ by at most 2*gamma_K*sum|terms| (gamma_K = K*u/(1-K*u)); the rounding
# errors have random signs, so in practice by about sqrt(K)*u*|partial sums|. Along a network the
# relative errors of the layers add up (each layer's output feeds the next with a gain of about
# one: batch norm, ReLU), so a model's outputs differ by about u * S, S = sum over the layers of
# sqrt(K_layer), and a softmax turns absolute logit errors into relative errors of its outputs.
# We allow 8 * u * S (a 4-sigma margin, times 2 for the two runs' errors), rounded up to a
# power of ten:
#   mlp, relax_mlp(_dyn): K = 64, 32 (and the softmax's 10): S = 8 + 5.7 + 3.2 = 17,
#       8uS = 8.1e-6 -> rtol 1e-5
#   conv: K = 27 (conv 3x3x3), 2048 (dense): S = 5.2 + 45 = 50, 8uS = 2.4e-5 -> rtol 1e-4
#   relax_multi main: K = 8: 8uS = 1.4e-6 -> rtol 1e-5 (double, int_sum: exact, see below)
#   resnet18: conv1 K = 147, four 3x3 convs each at 64/128/256/512 channels (K = 576, 1152,
#       2304, 4608), fc K = 512, softmax 1000: S = 12 + 4*(24 + 34 + 48 + 68) + 23 + 32 = 763,
#       8uS = 3.6e-4 -> rtol 1e-3
#   mobilenet: conv 3x3x3, 13 depthwise 3x3 (K = 9), 13 pointwise (K = 32 ... 1024), fc 1024,
#       softmax 1000: S = 5 + 39 + 257 + 32 + 32 = 365, 8uS = 1.7e-4 -> rtol 1e-3
# atol: outputs that cancel to near zero keep the absolute error of their terms' scale; the
# softmax outputs of the 1000-class models are about 1e-3, so atol = 1e-3 * rtol keeps the
# relative bound there; the small models' outputs are O(0.1..1): atol = 1e-6.
# Exact (0, 0): element-wise kernels only, one IEEE operation per element and kernel (no
# contraction across kernels, correctly rounded on every target): relax_control, relax_chain,
# relax_multi's double (x + x) and int_sum (integers).
TOLERANCES = {
    "mlp": (1e-5, 1e-6),
    "mlp_linked": (1e-5, 1e-6),
    "conv": (1e-4, 1e-6),
    "relax_mlp": (1e-5, 1e-6),
    "relax_mlp_dyn": (1e-5, 1e-6),
    "relax_multi": (1e-5, 1e-6),
    "relax_control": (0.0, 0.0),
    "relax_chain": (0.0, 0.0),
    "resnet18": (1e-3, 1e-6),
    "mobilenet": (1e-3, 1e-6),
    "relax_resnet18": (1e-3, 1e-6),
    "relax_mobilenet": (1e-3, 1e-6),
}
EXACT_CALLS = {("relax_multi", "double"), ("relax_multi", "int_sum"),
               ("relax_multi", "shape")}


def log(msg):
    print(msg, flush=True)


def script_hash():
    h = hashlib.sha256()
    for p in (HERE, bf.HERE):  # the models' definitions are build_fixtures.py's
        with open(p, "rb") as f:
            h.update(f.read())
    return h.hexdigest()


class Board:
    def __init__(self, arch, out):
        from tvm.contrib import cc

        self.arch = arch
        self.rust_arch, self.gnu, target, self.config = ARCHES[arch]
        self.target_str = target
        self.out = out
        self.gcc = self.gnu + "-gcc"
        self.fcompile = cc.cross_compiler(self.gcc)
        self.manifest = {}

    def pass_context(self, opt_level):
        import tvm

        return tvm.transform.PassContext(opt_level=opt_level, config=dict(self.config))

    def save(self, name, arrays):
        d = os.path.join(self.out, name)
        os.makedirs(d, exist_ok=True)
        for k, a in arrays.items():
            np.save(os.path.join(d, k + ".npy"), a)

    def record(self, name, kind, t0, ref_entry, calls, description):
        so = os.path.join(self.out, name + ".so")
        rtol, atol = TOLERANCES[name]
        for c in calls:
            exact = (name, c["function"]) in EXACT_CALLS
            c["rtol"], c["atol"] = (0.0, 0.0) if exact else (rtol, atol)
        self.manifest[name] = {
            "kind": kind,
            "file": name + ".so",
            "npy_dir": name,
            "description": description,
            "target": self.target_str,
            "pass_config": self.config,
            "reference": {"runtime": "x86-64 reference (hhb-tvm, in the build process)",
                          "target": ref_entry["target"]},
            "calls": calls,
            "bytes": os.path.getsize(so),
            "build_seconds": round(time.time() - t0, 1),
        }
        log(f"    {self.arch:<8} {name:<16} {os.path.getsize(so):>11,d} B  "
            f"{time.time() - t0:6.1f} s")


class CrossBuilder(bf.Builder):
    """build_fixtures.py's Builder, writing its x86-64 builds to a scratch directory (the
    references) and compiling every model again for each board."""

    def __init__(self, scratch, boards):
        super().__init__(scratch)
        self.boards = boards

    # graph models: relay.build for each board, the reference graph executor's outputs on x86
    def model(self, name, func_or_mod, params, inputs, link_params=False, tol=(1e-5, 1e-6),
              description="", target=None):
        from tvm import relay
        from tvm.relay.backend import Executor

        lib = super().model(name, func_or_mod, params, inputs, link_params=link_params, tol=tol,
                            description=description, target=target)
        ref = dict(np.load(self.path(name + ".npz")))
        outs = sorted(k for k in ref if k.startswith("output_"))
        mod = func_or_mod if isinstance(func_or_mod, self.tvm.IRModule) else \
            self.tvm.IRModule.from_expr(func_or_mod)
        kwargs = {"executor": Executor("graph", {"link-params": True})} if link_params else {}
        for b in self.boards:
            t0 = time.time()
            with b.pass_context(3):
                blib = relay.build(mod, target=b.target_str, params=params, **kwargs)
            blib.export_library(os.path.join(b.out, name + ".so"), fcompile=b.fcompile)
            b.save(name, ref)
            b.record(name, "graph", t0, self.manifest[name], [{
                "function": "default", "inputs": {k: k for k in inputs}, "outputs": outs}],
                description)
        return lib

    def board_relax(self, b, name, mod, ref_entry, arrays, description, lower=True):
        from tvm import relax

        t0 = time.time()
        if lower:
            mod = relax.transform.LambdaLift()(relax.transform.LegalizeOps()(mod))
        with b.pass_context(2):  # relax.build's default, as the x86-64 fixtures
            ex = relax.build(mod, b.target_str)
        ex.export_library(os.path.join(b.out, name + ".so"), fcompile=b.fcompile)
        b.save(name, arrays)
        sig = ref_entry["signatures"]
        calls = []
        for c in ref_entry["calls"]:
            params = [p["name"] for p in sig[c["function"]]]
            shapes = c["result"] if isinstance(c["result"], dict) else None
            calls.append({"function": c["function"], "inputs": dict(zip(params, c["args"])),
                          "outputs": [] if shapes else c["outputs"],
                          "shape_outputs": [shapes["shape"]] if shapes else []})
        b.record(name, "relax", t0, ref_entry, calls, description)

    # core Relax models: the same IRModule for every target
    def relax_export(self, name, mod, calls, description, target=None):
        arrays = super().relax_export(name, mod, calls, description, target=target)
        for b in self.boards:
            self.board_relax(b, name, mod, self.manifest[name], arrays, description)
        return arrays

    # resnet18 / mobilenet as Relax: from_relay lowers with each target's operator strategies
    def relax_big_models(self):
        from tvm.relax.testing import relay_translator
        from tvm.relay import testing

        r = np.random.default_rng(2)  # build_fixtures.py's input
        data = r.standard_normal((1, 3, 224, 224)).astype("float32")
        calls = [("main", [("data", data)], "output")]
        for name, (mod, params) in [
            ("relax_resnet18", testing.resnet.get_workload(num_layers=18, batch_size=1,
                                                           image_shape=(3, 224, 224))),
            ("relax_mobilenet", testing.mobilenet.get_workload(batch_size=1)),
        ]:
            what = (f"relay.testing {name[6:]} (random weights, bound as constants) converted "
                    "with relax.testing.relay_translator.from_relay(opt_level=3): data float32"
                    "[1,3,224,224] -> softmax float32[1,1000]")
            ref_target = self.tvm.target.Target(bf.MODEL_TARGET)
            rmod = relay_translator.from_relay(mod["main"], ref_target, params, opt_level=3)
            arrays = bf.Builder.relax_export(self, name, rmod, calls, what, target=ref_target)
            for b in self.boards:
                with b.pass_context(3):
                    bmod = relay_translator.from_relay(mod["main"], b.target_str, params,
                                                       opt_level=3)
                self.board_relax(b, name, bmod, self.manifest[name], arrays, what)


def stamped_groups(out, digest):
    try:
        with open(os.path.join(out, "stamp")) as fh:
            stamp = json.load(fh)
        with open(os.path.join(out, "cross.json")) as fh:
            manifest = json.load(fh)
    except (OSError, ValueError):
        return set()
    if stamp.get("script_sha256") != digest:
        return set()
    if not all(os.path.isfile(os.path.join(out, e["file"])) for e in manifest.values()):
        return set()
    return set(stamp.get("groups", []))


def main():
    cache = os.environ.get("TVMRT_CACHE", os.path.expanduser("~/.cache/tvm-runtime-rs"))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", action="append", choices=sorted(ARCHES),
                    help="a board (repeatable; default: all three)")
    ap.add_argument("--models", action="store_true",
                    help="also resnet18 and mobilenet, as graph libraries and Relax executables")
    ap.add_argument("--force", action="store_true", help="rebuild even when the stamp matches")
    ap.add_argument("--cache", default=cache, help="where fixtures-<arch> go (default: "
                    "$TVMRT_CACHE)")
    args = ap.parse_args()
    want = {"core"} | ({"models"} if args.models else set())
    digest = script_hash()

    os.makedirs(args.cache, exist_ok=True)
    with open(os.path.join(args.cache, ".cross-fixtures.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        # per board: the groups still to build (a board is built from scratch when any is
        # missing: the groups share the scratch references, which are cheap next to the models)
        todo = {}
        for arch in args.arch or sorted(ARCHES):
            out = os.path.join(args.cache, "fixtures-" + ARCHES[arch][0])
            have = set() if args.force else stamped_groups(out, digest)
            if want <= have:
                log(f"cross fixtures: {arch} up to date in {out} ({', '.join(sorted(have))})")
                continue
            todo[arch] = out
        if not todo:
            return 0
        for gcc in (ARCHES[a][1] + "-gcc" for a in todo):
            if not shutil.which(gcc):
                log(f"cross fixtures: {gcc} is missing (run scripts/cross_setup.sh)")
                return 1

        import tvm

        boards = []
        for arch, out in todo.items():
            if os.path.isdir(out):
                shutil.rmtree(out)
            os.makedirs(out)
            boards.append(Board(arch, out))
        log(f"cross fixtures: building {', '.join(sorted(want))} for {', '.join(todo)} "
            f"(tvm {tvm.__version__})")
        t0 = time.time()
        with tempfile.TemporaryDirectory(prefix="tvmrt-cross-ref-") as scratch:
            b = CrossBuilder(scratch, boards)
            steps = [("mlp/mlp_linked", b.mlp_models), ("conv", b.conv_model),
                     ("relax core", b.relax_core)]
            if "models" in want:
                steps += [("resnet18/mobilenet", b.big_models),
                          ("relax_resnet18/relax_mobilenet", b.relax_big_models)]
            for label, step in steps:
                t = time.time()
                log(f"  {label}")
                step()
                log(f"  built {label} ({time.time() - t:.1f} s, x86-64 references included)")
        for board in boards:
            with open(os.path.join(board.out, "cross.json"), "w") as fh:
                json.dump(board.manifest, fh, indent=1)
                fh.write("\n")
            with open(os.path.join(board.out, "stamp"), "w") as fh:
                json.dump({"script_sha256": digest, "groups": sorted(want),
                           "tvm": tvm.__version__}, fh)
                fh.write("\n")
        log(f"cross fixtures: done in {time.time() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
