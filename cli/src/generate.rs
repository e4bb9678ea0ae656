//! `tvmrt generate`: token generation with a decoder built by `tvm.relax.frontend.nn` (a
//! `prefill` and a `decode` function, `nn.KVCache` state from `_initialize_effect`, weights in
//! an `ndarray-cache.json` directory, passed in the order of its records).

use std::time::Instant;

use tvm_runtime::object::containers::{ArrayObj, ShapeTupleObj};
use tvm_runtime::relax_vm::llm::{ndarray_cache, sampling};
use tvm_runtime::relax_vm::VirtualMachine;
use tvm_runtime::{ArgValue, DLDevice, Error, Function, NDArray, Result, RetValue};

/// How to pick the next token.
pub struct Sampler {
    /// Top-p threshold; `None`: greedy.
    pub top_p: Option<f64>,
    /// Softmax temperature for top-p.
    pub temperature: f64,
    /// Seed of the uniform samples.
    pub seed: u64,
}

/// SplitMix64: a small, well-known generator for reproducible uniform samples.
fn next_uniform(state: &mut u64) -> f64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// Parses `1,2,3`.
pub fn parse_ids(s: &str) -> Result<Vec<i32>> {
    s.split(',')
        .map(|t| {
            t.trim()
                .parse::<i32>()
                .map_err(|_| Error::value(format!("bad token id '{t}' in --prompt-ids")))
        })
        .collect()
}

fn call(
    f: &Function,
    ids: &NDArray,
    total: i64,
    state: &[RetValue],
) -> Result<(Vec<f32>, RetValue)> {
    let shape = RetValue::Object(ShapeTupleObj::new_ref(&[total]));
    let mut args: Vec<ArgValue<'_>> = vec![ids.into(), shape.as_arg()];
    args.extend(state.iter().map(RetValue::as_arg));
    let out = f.call(&args)?;
    let arr = match &out {
        RetValue::Object(o) => o.downcast_ref::<ArrayObj>(),
        _ => None,
    }
    .filter(|a| a.items.len() == 2)
    .ok_or_else(|| Error::value("the model must return (logits, state)"))?;
    let logits = NDArray::from_object(
        arr.items[0]
            .clone()
            .ok_or_else(|| Error::value("no logits"))?,
    )?;
    let sh = logits.shape().to_vec();
    let v = logits.to_vec::<f32>()?;
    let vocab = *sh.last().ok_or_else(|| Error::value("scalar logits"))? as usize;
    let last = v[v.len() - vocab..].to_vec();
    let effects = RetValue::Object(
        arr.items[1]
            .clone()
            .ok_or_else(|| Error::value("no state"))?,
    );
    Ok((last, effects))
}

fn argmax(v: &[f32]) -> usize {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = i;
        }
    }
    best
}

/// Generates `max_new` tokens after `prompt`; prints them and the timing.
pub fn generate(
    model: &str,
    params: &str,
    prompt: &[i32],
    max_new: usize,
    s: &Sampler,
) -> Result<()> {
    if prompt.is_empty() {
        return Err(Error::value("the prompt is empty"));
    }
    let vm = VirtualMachine::load(model)?;
    vm.init(&[DLDevice::CPU])?;
    let t0 = Instant::now();
    // SAFETY: the command's help states that the weight files must not change while it runs
    // (the contract of every memory-mapped loader); the arrays die with the command.
    let weights = unsafe { ndarray_cache::read_cache_dir(params, DLDevice::CPU)? };
    let load_s = t0.elapsed().as_secs_f64();
    let m = vm.module();
    let (init, prefill, decode) = (
        m.function("_initialize_effect")?,
        m.function("prefill")?,
        m.function("decode")?,
    );
    let effects = match init.call(&[])? {
        RetValue::Object(o) => o,
        _ => return Err(Error::value("_initialize_effect returned no state")),
    };
    let want = vm.param_names("prefill")?.len();
    let n_eff = effects
        .downcast_ref::<ArrayObj>()
        .map_or(0, |a| a.items.len());
    if want != 2 + n_eff + weights.len() {
        return Err(Error::value(format!(
            "prefill takes {want} arguments but ids, total_len, {n_eff} states and {} weights make {}",
            weights.len(),
            2 + n_eff + weights.len()
        )));
    }
    let weight_vals: Vec<RetValue> = weights
        .into_iter()
        .map(|(_, a)| RetValue::Object(a.into_object()))
        .collect();
    let unpack = |e: &RetValue| -> Result<Vec<RetValue>> {
        let RetValue::Object(o) = e else {
            return Err(Error::value("the model state is not a tuple"));
        };
        let a = o
            .downcast_ref::<ArrayObj>()
            .ok_or_else(|| Error::value("the model state is not a tuple"))?;
        let mut v: Vec<RetValue> = a
            .items
            .iter()
            .map(|i| i.clone().map_or(RetValue::Null, RetValue::Object))
            .collect();
        v.extend(weight_vals.iter().cloned());
        Ok(v)
    };
    let mut rng = s.seed;
    let mut pick = |logits: &[f32]| -> Result<i32> {
        Ok(match s.top_p {
            None => argmax(logits),
            Some(p) => sampling::sample_top_p_from_logits(
                logits,
                s.temperature,
                p,
                next_uniform(&mut rng),
            )?,
        } as i32)
    };
    let ids = NDArray::from_slice(prompt, &[1, prompt.len() as i64])?;
    let t1 = Instant::now();
    let (mut logits, mut state) = call(
        &prefill,
        &ids,
        prompt.len() as i64,
        &unpack(&RetValue::Object(effects))?,
    )?;
    let prefill_s = t1.elapsed().as_secs_f64();
    let mut out = Vec::new();
    let mut total = prompt.len() as i64;
    let t2 = Instant::now();
    for step in 0..max_new {
        let tok = pick(&logits)?;
        out.push(tok);
        if step + 1 == max_new {
            break;
        }
        total += 1;
        let ids = NDArray::from_slice(&[tok], &[1, 1])?;
        (logits, state) = call(&decode, &ids, total, &unpack(&state)?)?;
    }
    let decode_s = t2.elapsed().as_secs_f64();
    println!(
        "{}",
        out.iter().map(i32::to_string).collect::<Vec<_>>().join(",")
    );
    let steps = max_new.saturating_sub(1).max(1);
    eprintln!(
        "weights {:.1} ms, prefill {:.2} ms, {} decode steps {:.2} ms ({:.1} tokens/s)",
        load_s * 1e3,
        prefill_s * 1e3,
        max_new.saturating_sub(1),
        decode_s * 1e3,
        steps as f64 / decode_s.max(1e-9)
    );
    Ok(())
}
