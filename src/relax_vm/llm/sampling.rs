//! Sampling and logits processing on the host: `vm.builtin.sample_top_p_from_logits`,
//! `sample_top_p_from_prob`, `multinomial_from_uniform`, `apply_repetition_penalty`,
//! `apply_presence_and_frequency_penalty` and `apply_softmax_with_temperature`.
//!
//! The arithmetic follows the reference step for step (float32 sums, the same cut-offs), so
//! that the same uniform sample picks the same token. Ties between equal values are broken by
//! the lower index.

use crate::ndarray::{is_contiguous, NDArray, NDArrayObj};
use crate::packed_func::dtype::dtype_to_string;
use crate::packed_func::error::{Error, Result};
use crate::packed_func::registry::Registrar;
use crate::packed_func::types::{DLDataType, DLDevice, DLTensor, DL_CPU, DL_FLOAT, DL_INT};
use crate::packed_func::value::{ArgValue, Args, RetValue};

const F32: DLDataType = DLDataType::new(DL_FLOAT, 32, 1);
const I32: DLDataType = DLDataType::new(DL_INT, 32, 1);

fn bad(m: String) -> Error {
    Error::value(m)
}

/// A tensor argument (NDArray or DLTensor) with its checks: contiguous and of `dtype`.
fn tensor_arg(a: &Args<'_>, i: usize, what: &str, dtype: DLDataType) -> Result<*mut DLTensor> {
    let t = match a.get(i)? {
        ArgValue::DLTensor(t) => t.as_ptr(),
        ArgValue::Object(o) if o.downcast_ref::<NDArrayObj>().is_some() => {
            crate::ndarray::handle_of(&o.to_ref())
        }
        v => {
            return Err(Error::type_error_fmt(format_args!(
                "{what} must be a tensor, got {}",
                v.kind_name()
            )))
        }
    };
    // SAFETY: a tensor argument is valid during the call.
    let r = unsafe { &*t };
    if r.dtype != dtype {
        return Err(bad(format!(
            "{what} must be {}, got {}",
            dtype_to_string(dtype),
            dtype_to_string(r.dtype)
        )));
    }
    if !is_contiguous(r) || r.ndim < 1 {
        return Err(bad(format!(
            "{what} must be a contiguous tensor with at least one axis"
        )));
    }
    Ok(t)
}

/// The tensor's shape.
fn shape(t: *mut DLTensor) -> Vec<i64> {
    // SAFETY: a valid tensor argument (checked by tensor_arg); shape holds ndim entries.
    unsafe { crate::ndarray::shape_of(&*t) }.to_vec()
}

/// The elements of a tensor, copied to the host.
fn read<T: crate::ndarray::Element>(t: *mut DLTensor) -> Result<Vec<T>> {
    let sh = shape(t);
    // SAFETY: a valid tensor argument.
    let r = unsafe { &*t };
    let n = sh.iter().product::<i64>() as usize;
    let mut v = vec![T::default(); n];
    // SAFETY: the tensor is live, compact and of T (checked); `v` holds exactly its bytes.
    unsafe {
        crate::ndarray::copy_to_bytes(
            r,
            v.as_mut_ptr() as *mut std::ffi::c_void,
            n * std::mem::size_of::<T>(),
        )?
    };
    Ok(v)
}

/// The elements of a CPU tensor, to write in place.
fn host_mut<'a, T>(t: *mut DLTensor, what: &str) -> Result<&'a mut [T]> {
    // SAFETY: a valid tensor argument.
    let r = unsafe { &*t };
    if r.device.device_type != DL_CPU {
        return Err(bad(format!("{what} must be on the CPU")));
    }
    let n = shape(t).iter().product::<i64>() as usize;
    if n == 0 {
        return Ok(&mut []);
    }
    // SAFETY: a live compact CPU tensor of n elements of T (checked by the caller's dtype);
    // the caller holds it for the duration of the call.
    Ok(unsafe {
        std::slice::from_raw_parts_mut((r.data as *mut u8).add(r.byte_offset as usize) as *mut T, n)
    })
}

fn check_single_row(sh: &[i64], what: &str) -> Result<usize> {
    if sh[..sh.len() - 1].iter().any(|&d| d != 1) {
        return Err(bad(format!(
            "the leading dimensions of {what} must be 1, got shape {sh:?}"
        )));
    }
    let n = sh[sh.len() - 1] as usize;
    if n == 0 {
        return Err(bad(format!("{what} is empty")));
    }
    Ok(n)
}

/// Sorts (value, index) pairs by value, largest first; equal values by index.
fn sort_desc(d: &mut [(f32, usize)]) {
    d.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
}

/// Top-p sampling from logits at a temperature (below 1e-6: the argmax).
pub fn sample_top_p_from_logits(
    logits: &[f32],
    temperature: f64,
    top_p: f64,
    u: f64,
) -> Result<usize> {
    let mut d: Vec<(f32, usize)> = logits.iter().copied().zip(0..).collect();
    sort_desc(&mut d);
    if temperature < 1e-6 {
        return Ok(d[0].1);
    }
    let scale = (1.0 / temperature) as f32;
    let max = d[0].0;
    let mut sum = 0.0f32;
    for e in d.iter_mut() {
        e.0 = ((e.0 - max) * scale).exp();
        sum += e.0;
    }
    let (mut cum, mut top_sum) = (0.0f32, 0.0f32);
    for e in d.iter_mut() {
        let p = e.0 / sum;
        if (cum as f64) < top_p {
            top_sum += p;
        }
        cum += p;
        e.0 = cum;
    }
    for e in &d {
        if u < (e.0 / top_sum) as f64 {
            return Ok(e.1);
        }
    }
    if u <= d[0].0 as f64 {
        return Ok(d[0].1);
    }
    Err(bad(format!(
        "sample_top_p_from_logits: the uniform sample {u} is outside [0, 1)"
    )))
}

/// One top-p pass over the probabilities of at least `cutoff`; `None` when it cannot decide.
fn top_p_with_cutoff(prob: &[f32], top_p: f64, u: f64, cutoff: f32) -> Option<usize> {
    let mut d: Vec<(f32, usize)> = prob
        .iter()
        .copied()
        .zip(0..)
        .filter(|e| e.0 >= cutoff)
        .collect();
    if d.is_empty() {
        return None;
    }
    sort_desc(&mut d);
    if u < (d[0].0 as f64) / top_p {
        return Some(d[0].1);
    }
    let (mut cum, mut top_sum) = (0.0f32, 0.0f32);
    for e in d.iter_mut() {
        if (cum as f64) < top_p {
            top_sum += e.0;
        } else {
            break;
        }
        cum += e.0;
        e.0 = cum;
    }
    if (cum as f64) < top_p && cutoff != 0.0 {
        return None;
    }
    for e in &d {
        if u < (e.0 / top_sum) as f64 {
            return Some(e.1);
        }
    }
    Some(d[d.len() - 1].1)
}

/// Top-p sampling from probabilities (first among those ≥ top_p / 1024, then among all).
pub fn sample_top_p_from_prob(prob: &[f32], top_p: f64, u: f64) -> Result<usize> {
    if top_p < 1.0 {
        if let Some(i) = top_p_with_cutoff(prob, top_p, u, (top_p / 1024.0) as f32) {
            return Ok(i);
        }
    }
    top_p_with_cutoff(prob, top_p, u, 0.0).ok_or_else(|| {
        if prob.iter().all(|x| x.is_nan()) {
            bad("The output probabilities are all NaNs, can not sample from it".into())
        } else {
            bad("Cannot sample from the given probability distribution".into())
        }
    })
}

/// For each row, the first index where the running sum of probabilities exceeds its sample
/// (the last index if none does).
pub fn multinomial_from_uniform(prob: &[f32], vocab: usize, samples: &[f32]) -> Vec<i64> {
    samples
        .iter()
        .enumerate()
        .map(|(i, &s)| {
            let mut cum = 0.0f32;
            let mut idx = 0;
            for (j, &p) in prob[i * vocab..(i + 1) * vocab].iter().enumerate() {
                idx = j;
                cum += p;
                if cum > s {
                    break;
                }
            }
            idx as i64
        })
        .collect()
}

/// Softmax of `logits / temperature` in place (one pass for the running max and sum).
pub fn softmax_with_temperature(logits: &mut [f32], temperature: f64) {
    let inv = (1.0 / temperature) as f32;
    let mut m = f32::MIN_POSITIVE;
    let mut d = 0.0f64;
    for &l in logits.iter() {
        let x = l * inv;
        let prev = m;
        m = m.max(x);
        d = d * ((prev - m).exp() as f64) + ((x - m).exp() as f64);
    }
    for l in logits.iter_mut() {
        let x = *l * inv;
        *l = ((x - m).exp() as f64 / d) as f32;
    }
}

/// The token ids (and frequencies) arguments, checked against the vocabulary.
fn token_ids(a: &Args<'_>, i: usize, vocab: usize) -> Result<Vec<usize>> {
    let t = tensor_arg(a, i, "token ids", I32)?;
    read::<i32>(t)?
        .into_iter()
        .map(|id| {
            if id < 0 || id as usize >= vocab {
                Err(bad(format!(
                    "token id {id} is outside the vocabulary of {vocab}"
                )))
            } else {
                Ok(id as usize)
            }
        })
        .collect()
}

/// The logits to change in place: float32 on the CPU.
fn logits_mut<'a>(a: &Args<'_>, i: usize) -> Result<&'a mut [f32]> {
    host_mut::<f32>(tensor_arg(a, i, "logits", F32)?, "logits")
}

/// Registers the sampling functions.
pub(crate) fn register(r: &mut Registrar) {
    r.add("vm.builtin.sample_top_p_from_logits", |a, rv| {
        a.expect_len(
            4,
            "sample_top_p_from_logits(logits, temperature, top_p, uniform)",
        )?;
        let t = tensor_arg(&a, 0, "logits", F32)?;
        check_single_row(&shape(t), "logits")?;
        let v = read::<f32>(t)?;
        *rv = RetValue::Int(sample_top_p_from_logits(&v, a.f64(1)?, a.f64(2)?, a.f64(3)?)? as i64);
        Ok(())
    });
    r.add("vm.builtin.sample_top_p_from_prob", |a, rv| {
        a.expect_len(3, "sample_top_p_from_prob(prob, top_p, uniform)")?;
        let t = tensor_arg(&a, 0, "prob", F32)?;
        check_single_row(&shape(t), "prob")?;
        let v = read::<f32>(t)?;
        *rv = RetValue::Int(sample_top_p_from_prob(&v, a.f64(1)?, a.f64(2)?)? as i64);
        Ok(())
    });
    r.add("vm.builtin.multinomial_from_uniform", |a, rv| {
        a.expect_len(2, "multinomial_from_uniform(prob, uniform_samples)")?;
        let p = tensor_arg(&a, 0, "prob", F32)?;
        let s = tensor_arg(&a, 1, "uniform_samples", F32)?;
        let psh = shape(p);
        let (batch, vocab) = (psh[0], psh[psh.len() - 1]);
        let samples = read::<f32>(s)?;
        let prob = read::<f32>(p)?;
        if samples.len() as i64 != batch || prob.len() as i64 != batch * vocab || vocab == 0 {
            return Err(bad(format!(
                "multinomial_from_uniform: prob of shape {psh:?} and {} samples disagree",
                samples.len()
            )));
        }
        let out = multinomial_from_uniform(&prob, vocab as usize, &samples);
        let host = NDArray::from_slice(&out, &[batch, 1])?;
        // SAFETY: a valid tensor argument.
        let dev: DLDevice = unsafe { (*s).device };
        *rv = RetValue::Object(if dev.device_type == DL_CPU {
            host.into_object()
        } else {
            let mut d = NDArray::empty(&[batch, 1], host.dtype(), dev)?;
            host.copy_to(&mut d)?;
            d.into_object()
        });
        Ok(())
    });
    r.add("vm.builtin.apply_repetition_penalty", |a, _rv| {
        a.expect_len(3, "apply_repetition_penalty(logits, token_ids, penalty)")?;
        let logits = logits_mut(&a, 0)?;
        let ids = token_ids(&a, 1, logits.len())?;
        let penalty = a.f64(2)?;
        for id in ids {
            let l = &mut logits[id];
            *l = if *l <= 0.0 {
                (*l as f64 * penalty) as f32
            } else {
                (*l as f64 / penalty) as f32
            };
        }
        Ok(())
    });
    r.add("vm.builtin.apply_presence_and_frequency_penalty", |a, _rv| {
        a.expect_len(
            5,
            "apply_presence_and_frequency_penalty(logits, token_ids, token_freqs, presence, frequency)",
        )?;
        let logits = logits_mut(&a, 0)?;
        let ids = token_ids(&a, 1, logits.len())?;
        let freqs = read::<i32>(tensor_arg(&a, 2, "token freqs", I32)?)?;
        if freqs.len() != ids.len() {
            return Err(bad(format!(
                "{} token ids but {} frequencies",
                ids.len(),
                freqs.len()
            )));
        }
        let (presence, frequency) = (a.f64(3)?, a.f64(4)?);
        for (id, f) in ids.into_iter().zip(freqs) {
            logits[id] = (logits[id] as f64 - (f as f64 * frequency + presence)) as f32;
        }
        Ok(())
    });
    r.add("vm.builtin.apply_softmax_with_temperature", |a, _rv| {
        a.expect_len(2, "apply_softmax_with_temperature(logits, temperature)")?;
        let t = a.f64(1)?;
        if t <= 0.0 || t.is_nan() {
            return Err(bad(format!("the temperature must be positive, got {t}")));
        }
        softmax_with_temperature(logits_mut(&a, 0)?, t);
        Ok(())
    });
}
