#!/usr/bin/env python3
"""Builds the WebAssembly test kernels with TVM v0.27 (PyPI apache-tvm; the tvm-ffi ABI),
compiled for wasm32 as system-library objects that scripts/build_wasm.sh links with the
runtime into a model wasm, plus their inputs, expected outputs and weights.

    $TVMRT_FFI_PYTHON scripts/wasm/build_wasm_fixtures.py [--out DIR] [--native]

DIR defaults to $TVMRT_CACHE/wasm_fixtures; DIR/stamp holds this script's SHA-256 (a run
whose hash matches does nothing). Written there:

  objs/*.o          one system library: the Relax MLP (its kernels and its executable) and
                    a TE kernel `add_one` (B = A + 1 over float32, symbolic length)
  mlp/              the MLP's weights as an NDArray cache (ndarray-cache.json + one shard,
                    the format tvm.contrib.tvmjs.dump_ndarray_cache writes): w1, w2
  data.json         inputs and expected outputs (flat lists) for the node and browser tests
  mlp_native.so     with --native: the same MLP for x86_64 (benches: wasm vs native)
"""
import argparse
import hashlib
import json
import os
import shutil

import numpy as np

HERE = os.path.abspath(__file__)
WASM = {"kind": "llvm", "mtriple": "wasm32-unknown-unknown-wasm"}
# MLP sizes: x (B, D) -> relu(x @ w1) (B, H) -> @ w2 (B, O).
B, D, H, O = 4, 256, 512, 64


def objects_of(lib, out_dir, stem):
    """Writes a compiled module's objects (kernels, and the packed imports such as a Relax
    executable) as wasm object files, through export_library with a collecting fcompile."""
    got = []

    def collect(output, objects, options=None, cc=None, **kwargs):
        for i, o in enumerate(objects):
            dst = os.path.join(out_dir, f"{stem}{i}.o")
            shutil.copy(o, dst)
            got.append(dst)
        with open(output, "w") as f:
            f.write("\n".join(got))

    collect.output_format = "wasm"
    lib.export_library(os.path.join(out_dir, f"{stem}.list"), fcompile=collect)
    return got


def build(out):
    import tvm
    from tvm import relax, te
    from tvm.script import ir as I
    from tvm.script import relax as R

    target = tvm.target.Target(WASM)
    objs = os.path.join(out, "objs")
    os.makedirs(objs, exist_ok=True)
    rng = np.random.default_rng(20261127)
    data = {}

    n = te.var("n")
    A = te.placeholder((n,), name="A", dtype="float32")
    Bt = te.compute((n,), lambda i: A[i] + 1.0, name="B")
    f = te.create_prim_func([A, Bt]).with_attr("global_symbol", "add_one")

    @I.ir_module
    class Mlp:
        @R.function
        def main(x: R.Tensor((B, D), "float32"), w1: R.Tensor((D, H), "float32"),
                 w2: R.Tensor((H, O), "float32")) -> R.Tensor((B, O), "float32"):
            with R.dataflow():
                h = R.nn.relu(R.matmul(x, w1))
                y = R.matmul(h, w2)
                R.output(y)
            return y

    mlp = relax.transform.LegalizeOps()(Mlp)
    mlp["add_one"] = f  # a kernel beside the VM's, reached through the library import
    objects_of(tvm.compile(mlp, target=target), objs, "mlp")  # wasm: system library ""

    x = rng.standard_normal((B, D)).astype("float32")
    w1 = (rng.standard_normal((D, H)) / np.sqrt(D)).astype("float32")
    w2 = (rng.standard_normal((H, O)) / np.sqrt(H)).astype("float32")
    y = np.maximum(x @ w1, 0) @ w2
    data["mlp"] = {"x_shape": list(x.shape), "x": x.ravel().tolist(),
                   "y_shape": list(y.shape), "y": y.ravel().tolist()}
    write_cache(os.path.join(out, "mlp"), {"w1": w1, "w2": w2})
    np.save(os.path.join(out, "mlp_x.npy"), x)
    np.save(os.path.join(out, "mlp_w1.npy"), w1)
    np.save(os.path.join(out, "mlp_w2.npy"), w2)
    np.save(os.path.join(out, "mlp_y.npy"), y)
    native = tvm.compile(relax.transform.LegalizeOps()(Mlp), target=tvm.target.Target({"kind": "llvm"}))
    native.export_library(os.path.join(out, "mlp_native.so"))
    with open(os.path.join(out, "data.json"), "w") as fo:
        json.dump(data, fo)


def write_cache(d, arrays):
    """An NDArray cache: ndarray-cache.json and one raw shard, records 64-byte aligned."""
    os.makedirs(d, exist_ok=True)
    shard = bytearray()
    records = []
    for name, a in arrays.items():
        shard += b"\0" * (-len(shard) % 64)
        raw = np.ascontiguousarray(a).tobytes()
        records.append({"name": name, "shape": list(a.shape), "dtype": str(a.dtype),
                        "format": "raw", "nbytes": len(raw), "byteOffset": len(shard)})
        shard += raw
    with open(os.path.join(d, "params_shard_0.bin"), "wb") as fo:
        fo.write(shard)
    meta = {"metadata": {"ParamSize": len(records), "ParamBytes": len(shard)},
            "records": [{"dataPath": "params_shard_0.bin", "format": "raw-shard",
                         "nbytes": len(shard), "records": records}]}
    with open(os.path.join(d, "ndarray-cache.json"), "w") as fo:
        json.dump(meta, fo)


def main():
    ap = argparse.ArgumentParser()
    cache = os.environ.get("TVMRT_CACHE", os.path.expanduser("~/.cache/tvm-runtime-rs"))
    ap.add_argument("--out", default=os.path.join(cache, "wasm_fixtures"))
    a = ap.parse_args()
    with open(HERE, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    stamp = os.path.join(a.out, "stamp")
    if os.path.exists(stamp) and open(stamp).read().strip() == digest:
        print(f"wasm fixtures: up to date in {a.out}")
        return
    os.makedirs(a.out, exist_ok=True)
    if os.path.exists(stamp):
        os.remove(stamp)
    build(a.out)
    with open(stamp, "w") as f:
        f.write(digest + "\n")
    print(f"wasm fixtures: built in {a.out}")


if __name__ == "__main__":
    main()
