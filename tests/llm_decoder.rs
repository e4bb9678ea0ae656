//! The decoder fixture (scripts/build_llm_fixtures.py: a 2-layer `tvm.relax.frontend.nn`
//! decoder with `nn.KVCache`, weights from `dump_ndarray_cache`) driven through the crate's
//! safe API: `VirtualMachine`, the parameter cache (`ndarray_cache::load`, then the arrays by
//! name, as `vm.builtin.param_array_from_cache_by_name` gives them), a prefill and greedy
//! decode steps whose logits must equal, bit for bit, those the reference runtime produced
//! when the fixture was built (`expected.npz`), and whose tokens must be the reference's.
#![cfg(feature = "llm")]

#[path = "common/fixture_dirs.rs"]
mod fixture_dirs;
#[path = "common/skip.rs"]
mod skip;

use std::path::{Path, PathBuf};

use tvm_runtime::object::containers::{ArrayObj, ShapeTupleObj};
use tvm_runtime::relax_vm::llm::ndarray_cache;
use tvm_runtime::relax_vm::VirtualMachine;
use tvm_runtime::{ArgValue, DLDevice, Function, NDArray, RetValue};

/// The fixture directory, or None (the test reports itself skipped).
fn fixture() -> Option<PathBuf> {
    let d = fixture_dirs::dir()?.join("llm");
    let ok = d.join("stamp").exists();
    skip::available(ok, "TVMRT_REQUIRE_FIXTURES", || {
        format!(
            "the LLM fixture is not built: {} has no stamp (scripts/build_llm_fixtures.py)",
            d.display()
        )
    })
    .then_some(d)
}

fn npz<T: npyz::Deserialize>(path: &Path, key: &str) -> (Vec<u64>, Vec<T>) {
    let mut z = npyz::npz::NpzArchive::open(path).expect("open expected.npz");
    let a = z
        .by_name(key)
        .expect("read expected.npz")
        .unwrap_or_else(|| panic!("{key} is missing from expected.npz"));
    (a.shape().to_vec(), a.into_vec::<T>().expect("element type"))
}

/// One call of `prefill` or `decode`: (ids, total length, state..., weights...) →
/// (the last row of the logits, the new state).
fn step(
    f: &Function,
    ids: &[i32],
    total: i64,
    state: &RetValue,
    weights: &[NDArray],
) -> (Vec<f32>, RetValue) {
    let ids = NDArray::from_slice(ids, &[1, ids.len() as i64]).unwrap();
    let shape = RetValue::Object(ShapeTupleObj::new_ref(&[total]));
    let RetValue::Object(st) = state else {
        panic!("the state is not an object")
    };
    let st = st.downcast_ref::<ArrayObj>().expect("the state is a tuple");
    let st_vals: Vec<RetValue> = st
        .items
        .iter()
        .map(|i| i.clone().map_or(RetValue::Null, RetValue::Object))
        .collect();
    let mut args: Vec<ArgValue<'_>> = vec![(&ids).into(), shape.as_arg()];
    args.extend(st_vals.iter().map(RetValue::as_arg));
    args.extend(weights.iter().map(ArgValue::from));
    let out = f.call(&args).expect("model call");
    let RetValue::Object(o) = &out else {
        panic!("the model returned no tuple")
    };
    let tup = o.downcast_ref::<ArrayObj>().expect("(logits, state)");
    assert_eq!(tup.items.len(), 2, "the model returns (logits, state)");
    let logits = NDArray::from_object(tup.items[0].clone().unwrap()).unwrap();
    let vocab = *logits.shape().last().unwrap() as usize;
    let v = logits.to_vec::<f32>().unwrap();
    (
        v[v.len() - vocab..].to_vec(),
        RetValue::Object(tup.items[1].clone().unwrap()),
    )
}

fn argmax(v: &[f32]) -> i32 {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = i;
        }
    }
    best as i32
}

#[test]
fn greedy_generation_equals_the_reference_bit_for_bit() {
    let Some(d) = fixture() else { return };
    let exp = d.join("expected.npz");
    let (_, prompt) = npz::<i32>(&exp, "prompt");
    let (_, want_tokens) = npz::<i32>(&exp, "tokens");
    let (lshape, want_logits) = npz::<f32>(&exp, "logits");
    let vocab = lshape[1] as usize;
    assert_eq!(lshape[0] as usize, want_tokens.len() + 1);
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("meta.json")).unwrap()).unwrap();
    let names: Vec<String> = meta["param_names"]
        .as_array()
        .expect("meta.json param_names")
        .iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect();

    let vm = VirtualMachine::load(d.join("decoder.so").to_str().unwrap()).unwrap();
    vm.init(&[DLDevice::CPU]).unwrap();
    // SAFETY: the fixture's weight files, which nothing changes while the test runs.
    unsafe { ndarray_cache::load(d.join("params").to_str().unwrap(), DLDevice::CPU) }.unwrap();
    let weights = ndarray_cache::params_by_name(&names).unwrap();
    // The model holds its weights; the cache entries can go (as TVM's clients do).
    for n in &names {
        ndarray_cache::remove(n);
    }
    assert!(ndarray_cache::get(&names[0]).is_none());

    let m = vm.module();
    let init = m.function("_initialize_effect").unwrap();
    let prefill = m.function("prefill").unwrap();
    let decode = m.function("decode").unwrap();
    let state = init.call(&[]).unwrap();
    let mut total = prompt.len() as i64;
    let (mut logits, mut state) = step(&prefill, &prompt, total, &state, &weights);
    let mut tokens = Vec::new();
    for s in 0..want_tokens.len() {
        let want = &want_logits[s * vocab..(s + 1) * vocab];
        let same = logits
            .iter()
            .zip(want)
            .all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(same, "step {s}: logits differ from the reference's");
        let tok = argmax(&logits);
        tokens.push(tok);
        total += 1;
        (logits, state) = step(&decode, &[tok], total, &state, &weights);
    }
    let last = &want_logits[want_tokens.len() * vocab..];
    assert!(
        logits
            .iter()
            .zip(last)
            .all(|(a, b)| a.to_bits() == b.to_bits()),
        "final logits differ from the reference's"
    );
    assert_eq!(tokens, want_tokens, "tokens differ from the reference's");
}
