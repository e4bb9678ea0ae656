"""A small decoder-only transformer (tvm.relax.frontend.nn with nn.KVCache, built by the reference
compiler, weights from tvm.contrib.tvmjs.dump_ndarray_cache; scripts/build_llm_fixtures.py) run
through TVM's own Python client: weights loaded with vm.builtin.ndarray_cache.load and
vm.builtin.param_array_from_cache_by_name, a prefill and greedy decode steps whose logits must
equal, bit for bit, those the reference runtime produced when the fixture was built."""

import json
import os

import numpy as np
import pytest

import tvm
from tvm.runtime import relax_vm

import tvmrt_helpers as H

DIR = os.path.join(H.FIXTURES, "llm")


@pytest.fixture(scope="module")
def decoder():
    if not os.path.isfile(os.path.join(DIR, "stamp")):
        H.skip(f"no LLM fixture in {DIR} (run scripts/build_llm_fixtures.py)", H.REQUIRE_FIXTURES)
    meta = json.load(open(os.path.join(DIR, "meta.json")))
    e = np.load(os.path.join(DIR, "expected.npz"))
    vm = relax_vm.VirtualMachine(tvm.runtime.load_module(os.path.join(DIR, "decoder.so")), tvm.cpu())
    return meta, e, vm


def load_params(meta):
    clear = tvm.get_global_func("vm.builtin.ndarray_cache.clear")
    clear()
    tvm.get_global_func("vm.builtin.ndarray_cache.load")(os.path.join(DIR, "params"), 1, 0)
    params = tvm.get_global_func("vm.builtin.param_array_from_cache_by_name")(meta["param_names"])
    clear()
    return list(params)


def test_greedy_generation_matches_reference(decoder):
    meta, e, vm = decoder
    params = load_params(meta)
    prompt = e["prompt"].tolist()
    effects = vm["_initialize_effect"]()
    out = vm["prefill"](tvm.nd.array(np.array([prompt], "int32")),
                        tvm.runtime.ShapeTuple([len(prompt)]), *effects, *params)
    logits, effects = [out[0].numpy()[0, -1]], out[1]
    tokens, total = [], len(prompt)
    for step in range(len(e["tokens"])):
        np.testing.assert_array_equal(logits[-1], e["logits"][step], err_msg=f"step {step}")
        tok = int(np.argmax(logits[-1]))
        tokens.append(tok)
        total += 1
        out = vm["decode"](tvm.nd.array(np.array([[tok]], "int32")),
                           tvm.runtime.ShapeTuple([total]), *effects, *params)
        logits.append(out[0].numpy()[0, -1])
        effects = out[1]
    np.testing.assert_array_equal(logits[-1], e["logits"][-1])
    assert tokens == e["tokens"].tolist()


def test_top_p_sampling_is_reproducible(decoder):
    """Top-p sampling with seeded uniforms through vm.builtin.sample_top_p_from_logits on the
    reference's logits: the token equals the float32 model of the reference's algorithm
    (test_llm_builtins.np_top_p_from_logits), so both runtimes pick the same tokens."""
    from test_llm_builtins import np_top_p_from_logits

    meta, e, vm = decoder
    sample = tvm.get_global_func("vm.builtin.sample_top_p_from_logits")
    rng = np.random.default_rng(11)
    for step, lg in enumerate(e["logits"]):
        u = float(rng.random())
        tok = sample(tvm.nd.array(lg.reshape(1, -1).astype("float32")), 0.8, 0.9, u)
        lg32 = lg.astype("float32")
        assert tok == np_top_p_from_logits(lg32, 0.8, 0.9, u), step
        order = np.argsort(-lg32, kind="stable")
        # temperature 0 is the argmax
        assert sample(tvm.nd.array(lg.reshape(1, -1).astype("float32")), 0.0, 0.9, u) == order[0]
