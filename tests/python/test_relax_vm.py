"""Relax VM executables (the relax_* fixtures, built with relax.build by the reference compiler)
through TVM's own Python client, tvm.runtime.relax_vm.VirtualMachine, in runtime-only mode:
every output equals, bit for bit, what the reference runtime returned when the fixtures were
built. relax_resnet18 / relax_mobilenet (and their _par variants) run when built with
--models."""

import json
import os

import numpy as np
import pytest

import tvm
from tvm.runtime import relax_vm

import tvmrt_helpers as H

CORE = ["relax_mlp", "relax_mlp_dyn", "relax_control", "relax_multi", "relax_chain"]
MODELS = ["relax_resnet18", "relax_mobilenet", "relax_resnet18_par", "relax_mobilenet_par"]


def relax_fixture(name, require="TVMRT_REQUIRE_FIXTURES"):
    """(manifest entry, loaded executable, expected arrays); a missing fixture skips, or fails
    under TVMRT_REQUIRE_FIXTURES (TVMRT_REQUIRE_MODELS for the large models)."""
    entry, path, e = H.fixture_entry(name, require)
    assert entry["kind"] == "relax"
    lib = tvm.runtime.load_module(path)
    return entry, lib, e


def check_value(where, res, val, e):
    """`res` mirrors the result: a key (a tensor), {"shape": key} or a list (a tuple)."""
    if isinstance(res, list):
        assert isinstance(val, tvm.ir.container.Array), f"{where}: {type(val)}"
        assert len(val) == len(res), where
        for i, (r, v) in enumerate(zip(res, val)):
            check_value(f"{where}[{i}]", r, v, e)
    elif isinstance(res, dict):
        assert isinstance(val, tvm.runtime.ShapeTuple), f"{where}: {type(val)}"
        assert list(val) == e[res["shape"]].tolist(), where
    else:
        assert isinstance(val, tvm.nd.NDArray), f"{where}: {type(val)}"
        got, want = val.numpy(), e[res]
        assert (got.dtype, got.shape) == (want.dtype, want.shape), where
        assert got.tobytes() == want.tobytes(), f"{where}: {res} differs from the reference"


def run_calls(name, entry, vm, e):
    for c in entry["calls"]:
        for _ in range(c["repeat"]):
            ins = [tvm.nd.array(e[k]) for k in c["args"]]
            got = vm[c["function"]](*ins)
            check_value(f"{name}.{c['function']}", c["result"], got, e)
            for k, nd in zip(c["args"], ins):
                assert nd.numpy().tobytes() == e[k].tobytes(), f"{name}: input {k} changed"


@pytest.mark.parametrize("name", CORE)
def test_relax_fixture_equals_the_reference(name):
    entry, lib, e = relax_fixture(name)
    assert lib.type_key == "relax.Executable"
    vm = relax_vm.VirtualMachine(lib, tvm.cpu())
    run_calls(name, entry, vm, e)


@pytest.mark.parametrize("memory_cfg", ["naive", "pooled"])
def test_relax_naive_and_pooled_allocators(memory_cfg):
    entry, lib, e = relax_fixture("relax_mlp_dyn")
    vm = relax_vm.VirtualMachine(lib, tvm.cpu(), memory_cfg=memory_cfg)
    run_calls("relax_mlp_dyn", entry, vm, e)


def test_relax_function_arity_and_parameter_names():
    entry, lib, _ = relax_fixture("relax_multi")
    vm = relax_vm.VirtualMachine(lib, tvm.cpu())
    for fn, params in entry["signatures"].items():
        assert vm.module["get_function_arity"](fn) == len(params), fn
        names = [vm.module["get_function_param_name"](fn, i) for i in range(len(params))]
        assert names == [p["name"] for p in params], fn


def test_relax_stateful_set_input_invoke_get_outputs():
    entry, lib, e = relax_fixture("relax_control")
    vm = relax_vm.VirtualMachine(lib, tvm.cpu())
    c = entry["calls"][0]
    vm.set_input("main", *[e[k] for k in c["args"]])
    vm.invoke_stateful("main")
    out = vm.get_outputs("main")
    # get_outputs returns nested Python tuples of NDArrays
    z, (w, x) = out
    for key, got in zip([c["result"][0], *c["result"][1]], [z, w, x]):
        assert got.numpy().tobytes() == e[key].tobytes(), key


def test_relax_save_function_and_time_evaluator():
    entry, lib, e = relax_fixture("relax_chain")
    vm = relax_vm.VirtualMachine(lib, tvm.cpu())
    c = entry["calls"][0]
    x = tvm.nd.array(e[c["args"][0]])
    vm.save_function("main", "main_saved", x)
    got = vm["main_saved"]()
    assert got.numpy().tobytes() == e[c["result"]].tobytes()
    res = vm.time_evaluator("main", tvm.cpu(), number=3, repeat=2)(x)
    assert len(res.results) == 2 and all(t > 0 for t in res.results)


def kernel_calls_of(disasm, func):
    """The kernel calls (of the library's functions: neither vm.builtin.* nor VM functions)
    one run of the VM function `func` makes, in order, from the reference compiler's
    disassembly. `func` must be straight-line code calling no VM function, so that every run
    makes exactly these calls."""
    packed = {
        line[1 : -len(" packed_func;")]
        for line in disasm.splitlines()
        if line.startswith("@") and line.endswith(" packed_func;")
    }
    body = next(b for b in disasm.split("\n\n") if b.strip().startswith(f"@{func}:\n"))
    calls = []
    for line in body.strip().splitlines()[1:]:
        words = line.split()
        if words[0] == "call":
            assert words[1] in packed, f"@{func} calls the VM function {words[1]}"
            if not words[1].startswith("vm.builtin."):
                calls.append(words[1])
        else:
            assert words[0] == "ret", f"@{func} is not straight-line code: {line}"
    return calls


def test_relax_profiler_report_lists_every_kernel_call():
    entry, lib, e = relax_fixture("relax_chain")
    with open(os.path.join(H.FIXTURES, entry["disasm"])) as f:
        want = kernel_calls_of(f.read(), "main")
    assert len(want) == 100, "relax_chain makes a hundred kernel calls"
    vm = relax_vm.VirtualMachine(lib, tvm.cpu(), profile=True)
    report = vm.profile("main", tvm.nd.array(e[entry["calls"][0]["args"][0]]))
    calls = json.loads(report.json())["calls"]
    got = [c["Name"]["string"] for c in calls if not c["Name"]["string"].startswith("vm.builtin.")]
    assert got == want, "the profiled kernel calls are not the run's"
    table = report.table()
    assert "add" in table and "multiply" in table, table


def test_relax_missing_function_and_bad_input_are_errors():
    entry, lib, e = relax_fixture("relax_mlp")
    vm = relax_vm.VirtualMachine(lib, tvm.cpu())
    with pytest.raises((AttributeError, tvm.TVMError)):
        vm["no_such_function"]()
    good = e[entry["calls"][0]["args"][0]]
    # check_tensor_info (ValueError) and match_shape (RuntimeError): the message carries the
    # executable's error context, which names the parameter
    with pytest.raises(ValueError, match="param=x"):
        vm["main"](tvm.nd.array(good.astype("float64")))  # wrong dtype
    with pytest.raises(RuntimeError, match="param=x"):
        vm["main"](tvm.nd.array(good[:1]))  # wrong static shape
    # the VM still works afterwards
    run_calls("relax_mlp", entry, vm, e)


def test_relax_wrong_argument_count_is_an_internal_error_as_in_the_reference():
    entry, lib, e = relax_fixture("relax_mlp")
    vm = relax_vm.VirtualMachine(lib, tvm.cpu())
    with pytest.raises(tvm.error.InternalError, match="Invoking function main requires 1 inputs"):
        vm["main"]()
    run_calls("relax_mlp", entry, vm, e)


@pytest.mark.parametrize("name", MODELS)
def test_relax_large_models_equal_the_reference(name):
    entry, lib, e = relax_fixture(name, require="TVMRT_REQUIRE_MODELS")
    vm = relax_vm.VirtualMachine(lib, tvm.cpu())
    run_calls(name, entry, vm, e)
