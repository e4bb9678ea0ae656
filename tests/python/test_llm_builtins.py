"""Language-model builtins of the Relax VM runtime, on both runtimes: the parameter cache
(vm.builtin.ndarray_cache.* over files written by tvm.contrib.tvmjs.dump_ndarray_cache), the
classic KV cache (vm.builtin.attention_kv_cache_*) and host sampling (vm.builtin.sample_*,
vm.builtin.apply_*). Results are compared with numpy; functions the reference (TVM 0.16) does not
register are checked on ours only, and skip on the reference."""

import json
import os

import numpy as np
import pytest

import tvm
from tvm.contrib import tvmjs

import tvmrt_helpers as H


def gf(name):
    f = tvm.get_global_func(name, allow_missing=True)
    if f is None:
        if H.IS_OURS:
            pytest.fail(f"{name} is not registered on ours")
        H.skip(f"{name} is not registered by the reference runtime")
    return f


def bf16_round_trip(x):
    """What f32-to-bf16 keeps of a float32 array (TVM's own encoder, then the << 16 decode)."""
    return (tvmjs._convert_f32_to_bf16(x).astype(np.uint32) << 16).view(np.float32)


@pytest.fixture
def cache():
    """The cache functions, cleared before and after the test."""
    fns = {k: gf(f"vm.builtin.ndarray_cache.{k}") for k in ("load", "get", "update", "remove", "clear")}
    fns["clear"]()
    yield fns
    fns["clear"]()


def params(seed=0):
    rng = np.random.default_rng(seed)
    return {
        "param_0": rng.standard_normal((4, 8)).astype("float32"),
        "param_1": rng.integers(-100, 100, size=(3, 5)).astype("int32"),
        "param_2": rng.standard_normal((1000,)).astype("float16"),
        "param_3": np.zeros((0, 4), "int32"),
        "embed.weight": rng.standard_normal((16, 2)).astype("float32"),
    }


def dump(tmp_path, p, fmt="raw", shard_mb=1):
    d = str(tmp_path / f"cache_{fmt}")
    tvmjs.dump_ndarray_cache(p, d, encode_format=fmt, shard_cap_mb=shard_mb)
    return d


@pytest.mark.parametrize("fmt", ["raw", "f32-to-bf16"])
def test_load_dump_ndarray_cache(cache, tmp_path, fmt):
    p = params()
    d = dump(tmp_path, p, fmt)
    cache["load"](d, 1, 0)
    for name, v in p.items():
        got = cache["get"](name)
        assert got is not None, name
        assert got.dtype == str(v.dtype) and tuple(got.shape) == v.shape, name
        want = bf16_round_trip(v) if (fmt == "f32-to-bf16" and v.dtype == np.float32) else v
        np.testing.assert_array_equal(got.numpy(), want, err_msg=name)
    assert cache["get"]("not_there") is None


def test_many_shards(cache, tmp_path):
    rng = np.random.default_rng(1)
    p = {f"w_{i}": rng.standard_normal((300, 300)).astype("float32") for i in range(6)}
    d = dump(tmp_path, p, shard_mb=1)
    meta = json.load(open(os.path.join(d, "ndarray-cache.json")))
    assert len(meta["records"]) > 1
    cache["load"](d, 1, 0)
    arr = gf("vm.builtin.param_array_from_cache")("w", -1)
    assert len(arr) == 6
    for i, a in enumerate(arr):
        np.testing.assert_array_equal(a.numpy(), p[f"w_{i}"])


def test_param_functions(cache, tmp_path):
    p = params()
    cache["load"](dump(tmp_path, p), 1, 0)
    arr = gf("vm.builtin.param_array_from_cache")("param", 3)
    assert len(arr) == 3
    np.testing.assert_array_equal(arr[1].numpy(), p["param_1"])
    assert len(gf("vm.builtin.param_array_from_cache")("param", -1)) == 4
    with pytest.raises((tvm.TVMError, ValueError), match="param_4"):
        gf("vm.builtin.param_array_from_cache")("param", 8)
    names = ["embed.weight", "param_2"]
    by_name = gf("vm.builtin.param_array_from_cache_by_name")(names)
    np.testing.assert_array_equal(by_name[0].numpy(), p["embed.weight"])
    np.testing.assert_array_equal(by_name[1].numpy(), p["param_2"])
    unpacked = gf("vm.builtin.param_array_from_cache_by_name_unpacked")(*names)
    np.testing.assert_array_equal(unpacked[1].numpy(), p["param_2"])
    with pytest.raises((tvm.TVMError, ValueError), match="nope"):
        gf("vm.builtin.param_array_from_cache_by_name")(["param_0", "nope"])
    mod = gf("vm.builtin.param_module_from_cache")("param", 2)
    got = mod["get_params"]()
    np.testing.assert_array_equal(got[0].numpy(), p["param_0"])
    mod = gf("vm.builtin.param_module_from_cache_by_name")(["param_1"])
    np.testing.assert_array_equal(mod["get_params"]()[0].numpy(), p["param_1"])


def test_update_remove_clear(cache):
    a = tvm.nd.array(np.arange(5, dtype="float32"))
    cache["update"]("x", a, False)
    np.testing.assert_array_equal(cache["get"]("x").numpy(), a.numpy())
    with pytest.raises((tvm.TVMError, ValueError), match="already exists"):
        cache["update"]("x", a, False)
    if H.IS_OURS:  # v0.20 makes override optional; 0.16 needs all three arguments
        with pytest.raises((tvm.TVMError, ValueError), match="already exists"):
            cache["update"]("x", a)
    b = tvm.nd.array(np.arange(3, dtype="int64"))
    cache["update"]("x", b, True)
    np.testing.assert_array_equal(cache["get"]("x").numpy(), b.numpy())
    cache["remove"]("x")
    assert cache["get"]("x") is None
    cache["remove"]("x")
    cache["update"]("y", a, False)
    cache["clear"]()
    assert cache["get"]("y") is None


def test_tensor_cache_aliases(cache, tmp_path):
    if not H.IS_OURS:
        H.skip("vm.builtin.tensor_cache.* are TVM v0.22+ names (reference is 0.16)")
    p = params()
    gf("vm.builtin.tensor_cache.load")(dump(tmp_path, p), 1, 0)
    np.testing.assert_array_equal(cache["get"]("param_0").numpy(), p["param_0"])
    gf("vm.builtin.tensor_cache.clear")()
    assert cache["get"]("param_0") is None


def corrupt(tmp_path, how):
    """A small cache, spoilt in one way; returns its directory."""
    p = {"a": np.arange(6, dtype="float32"), "b": np.arange(4, dtype="int32")}
    d = dump(tmp_path, p)
    meta_path = os.path.join(d, "ndarray-cache.json")
    meta = json.load(open(meta_path))
    shard = os.path.join(d, meta["records"][0]["dataPath"])
    recs = meta["records"][0]["records"]
    if how == "missing_shard":
        os.remove(shard)
    elif how == "truncated_shard":
        with open(shard, "r+b") as f:
            f.truncate(os.path.getsize(shard) - 4)
    elif how == "size_disagrees":
        recs[1]["nbytes"] = 8
    elif how == "dtype_disagrees":
        recs[0]["dtype"] = "float64"
    elif how == "outside_shard":
        recs[1]["byteOffset"] = 100
    elif how == "bad_json":
        open(meta_path, "w").write("{not json")
        return d
    elif how == "missing_json":
        os.remove(meta_path)
        return d
    json.dump(meta, open(meta_path, "w"))
    return d


BAD = {
    "missing_shard": "shard|No such file|open",
    "truncated_shard": "corrupt|bytes",
    "size_disagrees": "nbytes|disagree|b",
    "dtype_disagrees": "nbytes|disagree|a",
    "outside_shard": "outside|shard",
    "bad_json": "JSON|json",
    "missing_json": "ndarray-cache.json|No such file",
}


@pytest.mark.parametrize("how", sorted(BAD))
def test_bad_cache_is_an_error_and_loads_nothing(cache, tmp_path, how):
    d = corrupt(tmp_path, how)
    if not H.IS_OURS and how in ("size_disagrees", "dtype_disagrees", "outside_shard"):
        H.skip("the reference does not check record sizes (it reads out of bounds)")
    with pytest.raises((tvm.TVMError, ValueError)) as e:
        cache["load"](d, 1, 0)
    if H.IS_OURS:
        assert any(w in str(e.value) for w in BAD[how].split("|")), str(e.value)
        # all or nothing: the good record was not published
        assert cache["get"]("a") is None and cache["get"]("b") is None


# ---------------------------------------------------------------------------------------------
# The classic KV cache (vm.builtin.attention_kv_cache_*).


def kv(name):
    return gf(f"vm.builtin.attention_kv_cache_{name}")


def rows(rng, n, cols=3, dtype="float32"):
    return rng.standard_normal((n, cols)).astype(dtype)


def test_kv_cache_append_view_popn_clear():
    rng = np.random.default_rng(2)
    init = rows(rng, 2)
    c = kv("create")(tvm.nd.array(init), tvm.runtime.ShapeTuple([2, 3]), -1)
    want = [init]
    for n in (1, 3, 0, 5):
        v = rows(rng, n)
        c = kv("append")(c, tvm.nd.array(v))
        want.append(v)
    want = np.concatenate(want)
    np.testing.assert_array_equal(kv("view")(c).numpy(), want)
    np.testing.assert_array_equal(kv("view")(c, tvm.runtime.ShapeTuple([11, 3])).numpy(), want)
    with pytest.raises((tvm.TVMError, ValueError)):
        kv("view")(c, tvm.runtime.ShapeTuple([10, 3]))
    c2 = kv("create")(tvm.nd.array(init), tvm.runtime.ShapeTuple([4, 3]), -1)
    kv("array_popn")([c, c2], 2)
    np.testing.assert_array_equal(kv("view")(c).numpy(), want[:9])
    assert kv("view")(c2).shape[0] == 0
    if H.IS_OURS:  # the reference ICHECKs (an abort-style fatal error)
        with pytest.raises((tvm.TVMError, ValueError), match="cannot pop"):
            kv("array_popn")([c, c2], 1)
        # nothing was popped from any cache
        assert kv("view")(c).shape[0] == 9
    # appending after a pop overwrites the popped rows
    v = rows(rng, 1)
    c = kv("append")(c, tvm.nd.array(v))
    np.testing.assert_array_equal(kv("view")(c).numpy(), np.concatenate([want[:9], v]))
    kv("array_clear")([c, c2])
    assert kv("view")(c).shape[0] == 0


def test_kv_cache_update_and_fill_count():
    rng = np.random.default_rng(3)
    init = rows(rng, 3, dtype="float16")
    c = kv("create")(tvm.nd.array(init), tvm.runtime.ShapeTuple([8, 3]), 2)
    np.testing.assert_array_equal(kv("view")(c).numpy(), init[:2])
    v = rows(rng, 2, dtype="float16")
    c = kv("update")(c, tvm.nd.array(v))
    np.testing.assert_array_equal(kv("view")(c).numpy(), v)
    with pytest.raises((tvm.TVMError, ValueError)):
        kv("append")(c, tvm.nd.array(rows(rng, 1)))  # float32 into a float16 cache


def window_model(chunks, max_size, sinks):
    """The rows a sliding-window cache with attention sinks holds, in storage order."""
    store, fill, pos = [], 0, 0
    for v in chunks:
        n = len(v)
        first = min(n, max_size - pos)
        for i in range(first):
            if pos + i < len(store):
                store[pos + i] = v[i]
            else:
                store.append(v[i])
        fill, pos = min(fill + n, max_size), min(pos + n, max_size)
        if first < n:
            for i in range(n - first):
                store[sinks + i] = v[first + i]
            pos = n - first + sinks
    return np.array(store[:fill])


@pytest.mark.parametrize("sinks", [0, 2])
def test_kv_cache_window_override(sinks):
    rng = np.random.default_rng(4 + sinks)
    max_size = 7
    c = kv("create")(tvm.nd.array(rows(rng, 0)), tvm.runtime.ShapeTuple([2, 3]), -1)
    chunks = []
    for n in (3, 2, 4, 1, 5, 3):
        v = rows(rng, n)
        chunks.append(v)
        if sinks:
            c = kv("window_override_with_sinks")(c, tvm.nd.array(v), max_size, sinks)
        else:
            c = kv("window_override")(c, tvm.nd.array(v), max_size)
        np.testing.assert_array_equal(kv("view")(c).numpy(), window_model(chunks, max_size, sinks))


# ---------------------------------------------------------------------------------------------
# Sampling on the host. A float32 numpy model of each function gives the expected token; the
# same assertions run on both runtimes, so both pick the same token for the same sample.


def np_top_p_from_logits(logits, temperature, top_p, u):
    order = np.argsort(-logits, kind="stable")
    if temperature < 1e-6:
        return int(order[0])
    s = logits[order]
    e = np.exp((s - s[0]) * np.float32(1.0 / temperature)).astype(np.float32)
    total = np.float32(0)
    for x in e:
        total = np.float32(total + x)
    cum, top_sum, cums = np.float32(0), np.float32(0), []
    for x in e:
        p = np.float32(x / total)
        if cum < top_p:
            top_sum = np.float32(top_sum + p)
        cum = np.float32(cum + p)
        cums.append(cum)
    for c, i in zip(cums, order):
        if u < np.float32(c / top_sum):
            return int(i)
    return int(order[0])


def np_top_p_from_prob(prob, top_p, u):
    def with_cutoff(cutoff):
        idx = [i for i in range(len(prob)) if prob[i] >= cutoff]
        if not idx:
            return None
        idx.sort(key=lambda i: -prob[i])
        if u < prob[idx[0]] / top_p:
            return idx[0]
        cum, top_sum, cums = np.float32(0), np.float32(0), []
        for i in idx:
            if cum < top_p:
                top_sum = np.float32(top_sum + prob[i])
            else:
                break
            cum = np.float32(cum + prob[i])
            cums.append(cum)
        if cum < top_p and cutoff != 0:
            return None
        for c, i in zip(cums, idx):
            if u < np.float32(c / top_sum):
                return i
        return idx[len(idx) - 1]

    if top_p < 1:
        r = with_cutoff(np.float32(top_p / 1024))
        if r is not None:
            return r
    return with_cutoff(np.float32(0))


def distinct_logits(rng, n):
    # distinct values: the order of ties is unspecified in the reference (std::sort)
    return (rng.permutation(n).astype(np.float32) * np.float32(0.37) - 5).astype(np.float32)


@pytest.mark.parametrize("temperature,top_p", [(0.0, 0.9), (0.7, 0.9), (1.0, 1.0), (1.3, 0.5)])
def test_sample_top_p_from_logits(temperature, top_p):
    rng = np.random.default_rng(5)
    f = gf("vm.builtin.sample_top_p_from_logits")
    for trial in range(20):
        logits = distinct_logits(rng, 50)
        u = float(rng.random())
        got = f(tvm.nd.array(logits.reshape(1, 1, 50)), temperature, top_p, u)
        assert got == np_top_p_from_logits(logits, temperature, top_p, u), (trial, u)


@pytest.mark.parametrize("top_p", [1.0, 0.9, 0.3])
def test_sample_top_p_from_prob(top_p):
    rng = np.random.default_rng(6)
    f = gf("vm.builtin.sample_top_p_from_prob")
    for trial in range(20):
        x = np.exp(distinct_logits(rng, 40) / 2)
        prob = (x / x.sum()).astype(np.float32)
        u = float(rng.random())
        got = f(tvm.nd.array(prob.reshape(1, 40)), top_p, u)
        assert got == np_top_p_from_prob(prob, top_p, u), (trial, u)


def test_same_uniform_same_token():
    """Sweeping the uniform sample walks through the tokens in order of probability."""
    logits = np.array([[0.0, 3.0, 1.0, 2.0]], np.float32)
    f = gf("vm.builtin.sample_top_p_from_logits")
    picks = [f(tvm.nd.array(logits), 1.0, 1.0, u) for u in np.linspace(0, 0.999, 200)]
    firsts = list(dict.fromkeys(picks))
    assert firsts == [1, 3, 2, 0]
    assert picks == sorted(picks, key=firsts.index)


def test_multinomial_from_uniform():
    rng = np.random.default_rng(7)
    f = gf("vm.builtin.multinomial_from_uniform")
    prob = rng.random((5, 30)).astype(np.float32)
    prob /= prob.sum(axis=1, keepdims=True)
    u = rng.random(5).astype(np.float32)
    got = f(tvm.nd.array(prob), tvm.nd.array(u)).numpy()
    assert got.shape == (5, 1) and got.dtype == np.int64
    cum = np.cumsum(prob, axis=1, dtype=np.float32)
    want = [min(int(np.argmax(cum[i] > u[i])) if (cum[i] > u[i]).any() else 29, 29) for i in range(5)]
    assert got[:, 0].tolist() == want


def test_apply_repetition_penalty():
    rng = np.random.default_rng(8)
    logits = rng.standard_normal(20).astype(np.float32)
    ids = np.array([1, 4, 7, 19], np.int32)
    nd = tvm.nd.array(logits)
    gf("vm.builtin.apply_repetition_penalty")(nd, tvm.nd.array(ids), 1.3)
    want = logits.copy()
    for i in ids:
        want[i] = want[i] * 1.3 if want[i] <= 0 else want[i] / 1.3
    np.testing.assert_array_equal(nd.numpy(), want.astype(np.float32))
    if H.IS_OURS:
        with pytest.raises((tvm.TVMError, ValueError), match="outside the vocabulary"):
            gf("vm.builtin.apply_repetition_penalty")(nd, tvm.nd.array(np.array([20], np.int32)), 1.3)


def test_apply_presence_and_frequency_penalty():
    rng = np.random.default_rng(9)
    logits = rng.standard_normal(20).astype(np.float32)
    ids = np.array([0, 3, 11], np.int32)
    freqs = np.array([1, 4, 2], np.int32)
    nd = tvm.nd.array(logits)
    gf("vm.builtin.apply_presence_and_frequency_penalty")(
        nd, tvm.nd.array(ids), tvm.nd.array(freqs), 0.5, 0.25
    )
    want = logits.astype(np.float64)
    want[ids] -= freqs * 0.25 + 0.5
    np.testing.assert_array_equal(nd.numpy(), want.astype(np.float32))


@pytest.mark.parametrize("temperature", [1.0, 0.5, 2.0])
def test_apply_softmax_with_temperature(temperature):
    rng = np.random.default_rng(10)
    logits = (rng.standard_normal(100) * 4).astype(np.float32)
    nd = tvm.nd.array(logits.reshape(1, 100))
    gf("vm.builtin.apply_softmax_with_temperature")(nd, temperature)
    x = logits.astype(np.float64) / temperature
    want = np.exp(x - x.max()) / np.exp(x - x.max()).sum()
    np.testing.assert_allclose(nd.numpy()[0], want, rtol=1e-5, atol=1e-7)


def test_sampling_bad_input():
    f = gf("vm.builtin.sample_top_p_from_logits")
    with pytest.raises((tvm.TVMError, ValueError)):
        f(tvm.nd.array(np.zeros((2, 4), np.float32)), 1.0, 1.0, 0.5)  # two rows
    if H.IS_OURS:  # the reference aborts on these through ICHECK
        with pytest.raises((tvm.TVMError, ValueError), match="float32"):
            f(tvm.nd.array(np.zeros((1, 4), np.float16)), 1.0, 1.0, 0.5)
        with pytest.raises((tvm.TVMError, ValueError), match="temperature"):
            gf("vm.builtin.apply_softmax_with_temperature")(
                tvm.nd.array(np.zeros(4, np.float32)), 0.0
            )
