#!/usr/bin/env python3
"""Builds the language-model fixture with the reference compiler (hhb-tvm 3.2.3 = TVM 0.16.dev0):
a small decoder-only transformer written with tvm.relax.frontend.nn (embedding, two attention
layers whose keys and values live in nn.KVCache, an MLP, an LM head), with `prefill` and `decode`
functions, seeded random weights exported with tvm.contrib.tvmjs.dump_ndarray_cache, and the
reference runtime's logits for a greedy generation.

    $TVMRT_PYTHON scripts/build_llm_fixtures.py [--out DIR] [--force]

DIR defaults to $TVMRT_CACHE/fixtures/llm. It holds decoder.so, params/ (ndarray-cache.json and
its shard), expected.npz (prompt, tokens, the logits of every step) and meta.json (parameter
names in argument order, sizes). DIR/stamp holds this script's SHA-256; a run with a matching
stamp does nothing.

Calling convention (what the tests do): effects = vm["_initialize_effect"](); then
vm["prefill"](ids[1, n] int32, ShapeTuple([total_len]), *effects, *params) returns
(logits[1, n, vocab], effects); vm["decode"] takes ids[1, 1] the same way.
"""
import argparse
import hashlib
import json
import os
import shutil
import sys

import numpy as np

HERE = os.path.abspath(__file__)
TARGET = "llvm -mtriple=x86_64-linux-gnu"
VOCAB, DIM, LAYERS, MAX_LEN = 64, 32, 2, 128
PROMPT = [1, 2, 3, 5, 8]
NEW_TOKENS = 16


def build_model():
    from tvm.relax.frontend import nn
    from tvm.relax.frontend.nn import op

    class Layer(nn.Module):
        def __init__(self):
            self.q = nn.Linear(DIM, DIM, bias=False)
            self.k = nn.Linear(DIM, DIM, bias=False)
            self.v = nn.Linear(DIM, DIM, bias=False)
            self.o = nn.Linear(DIM, DIM, bias=False)
            self.up = nn.Linear(DIM, 2 * DIM, bias=False)
            self.down = nn.Linear(2 * DIM, DIM, bias=False)
            self.k_cache = nn.KVCache(MAX_LEN, [DIM])
            self.v_cache = nn.KVCache(MAX_LEN, [DIM])

        def forward(self, x, total_len):
            q, k, v = self.q(x), self.k(x), self.v(x)
            self.k_cache.append(op.squeeze(k, 0))
            self.v_cache.append(op.squeeze(v, 0))
            keys = op.unsqueeze(self.k_cache.view(total_len), 0)
            values = op.unsqueeze(self.v_cache.view(total_len), 0)
            scores = op.matmul(q, op.permute_dims(keys, [0, 2, 1])) * (1.0 / np.sqrt(DIM))
            # no causal mask within the prompt: prefill and decode stay one code path each
            x = x + self.o(op.matmul(op.softmax(scores, axis=-1), values))
            return x + self.down(op.silu(self.up(x)))

    class Decoder(nn.Module):
        def __init__(self):
            self.embed = nn.Embedding(VOCAB, DIM)
            self.layers = nn.ModuleList([Layer() for _ in range(LAYERS)])
            self.head = nn.Linear(DIM, VOCAB, bias=False)

        def forward(self, ids, total_len):
            x = self.embed(ids)
            for layer in self.layers:
                x = layer(x, total_len)
            return self.head(x)

        def prefill(self, ids, total_len):
            return self.forward(ids, total_len)

        def decode(self, ids, total_len):
            return self.forward(ids, total_len)

    spec = {
        "prefill": {"ids": nn.spec.Tensor([1, "n"], "int32"), "total_len": int},
        "decode": {"ids": nn.spec.Tensor([1, 1], "int32"), "total_len": int},
    }
    return Decoder().export_tvm(spec=spec)


def generate(vm, params, prompt, steps):
    """Greedy generation; returns the tokens and the logits of every step."""
    import tvm

    effects = vm["_initialize_effect"]()
    ids = np.array([prompt], "int32")
    out = vm["prefill"](tvm.nd.array(ids), tvm.runtime.ShapeTuple([len(prompt)]), *effects, *params)
    logits = [out[0].numpy()[0, -1]]
    effects = out[1]
    tokens = []
    total = len(prompt)
    for _ in range(steps):
        tok = int(np.argmax(logits[-1]))
        tokens.append(tok)
        total += 1
        out = vm["decode"](tvm.nd.array(np.array([[tok]], "int32")),
                           tvm.runtime.ShapeTuple([total]), *effects, *params)
        logits.append(out[0].numpy()[0, -1])
        effects = out[1]
    return tokens, np.stack(logits)


def main():
    ap = argparse.ArgumentParser()
    cache = os.environ.get("TVMRT_CACHE", os.path.expanduser("~/.cache/tvm-runtime-rs"))
    ap.add_argument("--out", default=os.path.join(cache, "fixtures", "llm"))
    ap.add_argument("--force", action="store_true")
    args = ap.parse_args()
    digest = hashlib.sha256(open(HERE, "rb").read()).hexdigest()
    stamp = os.path.join(args.out, "stamp")
    if not args.force and os.path.isfile(stamp) and open(stamp).read().strip() == digest:
        return 0

    import tvm
    from tvm import relax
    from tvm.contrib import tvmjs
    from tvm.runtime import relax_vm

    tmp = args.out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    mod, named = build_model()
    ex = relax.build(mod, tvm.target.Target(TARGET))
    ex.export_library(os.path.join(tmp, "decoder.so"))
    rng = np.random.default_rng(2024)
    weights = {n: (rng.standard_normal([int(d) for d in p.shape]) * 0.5).astype(p.dtype)
               for n, p in named}
    tvmjs.dump_ndarray_cache(weights, os.path.join(tmp, "params"), encode_format="raw")
    vm = relax_vm.VirtualMachine(tvm.runtime.load_module(os.path.join(tmp, "decoder.so")),
                                 tvm.cpu())
    params = [tvm.nd.array(weights[n]) for n, _ in named]
    tokens, logits = generate(vm, params, PROMPT, NEW_TOKENS)
    np.savez(os.path.join(tmp, "expected.npz"), prompt=np.array(PROMPT, "int32"),
             tokens=np.array(tokens, "int32"), logits=logits)
    json.dump({"param_names": [n for n, _ in named], "vocab": VOCAB, "dim": DIM,
               "layers": LAYERS, "max_len": MAX_LEN, "target": TARGET},
              open(os.path.join(tmp, "meta.json"), "w"), indent=1)
    open(os.path.join(tmp, "stamp"), "w").write(digest + "\n")
    shutil.rmtree(args.out, ignore_errors=True)
    os.rename(tmp, args.out)
    print(f"llm fixture: {args.out} (tokens {tokens})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
