//! The time evaluator (`runtime.RPCTimeEvaluator` for local modules): runs a function
//! `1 + number × repeat` times (more when `min_repeat_ms` asks) and reports the mean time
//! of each repeat, in seconds, as packed little-endian `f64`s, with the semantics of the
//! reference's `WrapTimeEvaluator`.

use crate::device;
use crate::ndarray::NDArray;
use crate::packed_func::error::{Error, Result};
use crate::packed_func::types::{DLDataType, DLDevice, DL_CPU, DL_INT};
use crate::sync::Instant;
#[cfg(feature = "profiling")]
use crate::{
    module::Module,
    packed_func::function::Function,
    packed_func::registry,
    packed_func::types::TVMValue,
    packed_func::value::{Args, RetValue},
};
use std::time::Duration;

/// How to measure.
#[derive(Clone, Debug, PartialEq)]
pub struct TimeEvalConfig {
    /// Calls per measurement (raised automatically to reach `min_repeat_ms`).
    pub number: i64,
    /// Measurements to report.
    pub repeat: i64,
    /// Minimum duration of one measurement in milliseconds (0: no minimum).
    pub min_repeat_ms: i64,
    /// Give up raising `number` after this many measurements that took no time at all.
    pub limit_zero_time_iterations: i64,
    /// Pause between measurements, in milliseconds (0: none).
    pub cooldown_interval_ms: i64,
    /// Pause after every this many measurements.
    pub repeats_to_cooldown: i64,
    /// Bytes of device memory to copy before each measurement to flush caches (0: none).
    pub cache_flush_bytes: i64,
}

impl Default for TimeEvalConfig {
    fn default() -> Self {
        TimeEvalConfig {
            number: 10,
            repeat: 1,
            min_repeat_ms: 0,
            limit_zero_time_iterations: 100,
            cooldown_interval_ms: 0,
            repeats_to_cooldown: 1,
            cache_flush_bytes: 0,
        }
    }
}

impl TimeEvalConfig {
    /// The settings in their argument order: `number, repeat, min_repeat_ms,
    /// limit_zero_time_iterations, cooldown_interval_ms, repeats_to_cooldown` (`v` holds at
    /// least six), then `cache_flush_bytes`.
    #[cfg(any(feature = "graph", feature = "profiling"))]
    pub(crate) fn from_values(v: &[i64], cache_flush_bytes: i64) -> Self {
        let v = &v[..6];
        TimeEvalConfig {
            number: v[0],
            repeat: v[1],
            min_repeat_ms: v[2],
            limit_zero_time_iterations: v[3],
            cooldown_interval_ms: v[4],
            repeats_to_cooldown: v[5],
            cache_flush_bytes,
        }
    }

    /// Checks the settings, as the reference's debug executor does.
    pub fn validate(&self) -> Result<()> {
        let checks = [
            (self.number > 0, "number must be positive"),
            (self.repeat >= 0, "repeat must not be negative"),
            (
                self.min_repeat_ms >= 0,
                "min_repeat_ms must not be negative",
            ),
            (
                self.limit_zero_time_iterations >= 0,
                "limit_zero_time_iterations must not be negative",
            ),
            (
                self.cooldown_interval_ms >= 0,
                "cooldown_interval_ms must not be negative",
            ),
            (
                self.cache_flush_bytes >= 0,
                "cache_flush_bytes must not be negative",
            ),
        ];
        for (ok, msg) in checks {
            if !ok {
                return Err(Error::value_fmt(format_args!("time evaluator: {msg}")));
            }
        }
        Ok(())
    }
}

/// Waits for the device's queued work (the CPU runs synchronously).
#[inline]
pub(crate) fn sync_device(dev: DLDevice) -> Result<()> {
    if dev.device_type == DL_CPU {
        return Ok(());
    }
    sync_accelerator(dev)
}

/// [`sync_device`] for a device other than the CPU (out of line: one copy for all callers).
#[inline(never)]
fn sync_accelerator(dev: DLDevice) -> Result<()> {
    device::api(dev)?.sync(dev)
}

/// Measures `f` on `dev`: one discarded call, then `repeat` measurements, each the mean of
/// `number` calls (raised until a measurement lasts `min_repeat_ms`). `preproc` runs before
/// each measurement. Returns seconds per call, one value per repeat.
pub fn time_evaluate(
    f: &mut dyn FnMut() -> Result<()>,
    mut preproc: Option<&mut dyn FnMut() -> Result<()>>,
    dev: DLDevice,
    cfg: &TimeEvalConfig,
) -> Result<Vec<f64>> {
    cfg.validate()?;
    f()?;
    let mut flush = if cfg.cache_flush_bytes > 0 {
        let n = cfg.cache_flush_bytes / 4;
        let t = DLDataType::new(DL_INT, 32, 1);
        Some((NDArray::empty(&[n], t, dev)?, NDArray::empty(&[n], t, dev)?))
    } else {
        None
    };
    sync_device(dev)?;
    let mut number = cfg.number;
    let cooldown_every = cfg.repeats_to_cooldown.max(1);
    let mut out = Vec::with_capacity(cfg.repeat as usize);
    for i in 0..cfg.repeat {
        if let Some(p) = preproc.as_mut() {
            p()?;
        }
        let mut duration_ms = 0.0f64;
        let mut zero_times = 0;
        loop {
            if duration_ms > 0.0 {
                const GOLDEN_RATIO: f64 = 1.618;
                let per_call = duration_ms / number as f64;
                number = (cfg.min_repeat_ms as f64 / per_call + 1.0)
                    .max(number as f64 * GOLDEN_RATIO)
                    .min(i32::MAX as f64) as i64;
            }
            if let Some((a, b)) = &mut flush {
                b.copy_to(a)?;
            }
            sync_device(dev)?;
            let start = Instant::now();
            for _ in 0..number {
                f()?;
            }
            sync_device(dev)?;
            let nanos = start.elapsed().as_nanos();
            if nanos == 0 {
                zero_times += 1;
            }
            duration_ms = nanos as f64 / 1e6;
            if !(duration_ms < cfg.min_repeat_ms as f64
                && zero_times < cfg.limit_zero_time_iterations)
            {
                break;
            }
        }
        out.push(duration_ms / 1e3 / number as f64);
        if cfg.cooldown_interval_ms > 0 && i % cooldown_every == 0 {
            std::thread::sleep(Duration::from_millis(cfg.cooldown_interval_ms as u64));
        }
    }
    Ok(out)
}

/// Packs seconds as the reference returns them: consecutive native (little-endian) `f64`s.
pub fn pack_f64(v: &[f64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len() * 8);
    for x in v {
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}

/// Packs `run_individual` results as the reference does: the node count (`i64`), then each
/// node's `repeat` times (`f64`), little-endian.
pub fn pack_run_individual(times: &[Vec<f64>]) -> Vec<u8> {
    let mut out = (times.len() as i64).to_le_bytes().to_vec();
    for t in times {
        for x in t {
            out.extend_from_slice(&x.to_le_bytes());
        }
    }
    out
}

/// Calls `g` with copies of a caller's arguments (the time evaluator's function and its
/// preprocessor), dropping what it returns.
#[cfg(feature = "profiling")]
fn call_with(g: &Function, values: &mut [TVMValue], codes: &mut [i32]) -> Result<()> {
    let mut tmp = RetValue::Null;
    // SAFETY: the copies hold `values.len()` entries of the caller's arguments, whose
    // pointees live for this call.
    unsafe {
        g.obj().call_raw(
            values.as_mut_ptr(),
            codes.as_mut_ptr(),
            values.len() as i32,
            &mut tmp,
        )
    }
}

/// Wraps `pf` in a PackedFunc that measures it with the arguments it is called with and
/// returns the packed seconds.
#[cfg(feature = "profiling")]
pub fn wrap_time_evaluator(
    pf: Function,
    dev: DLDevice,
    cfg: TimeEvalConfig,
    f_preproc: Option<Function>,
) -> Function {
    Function::from_rust(move |args: Args<'_>, rv: &mut RetValue| {
        let mut values: Vec<TVMValue> = args.values().to_vec();
        let mut codes: Vec<i32> = args.codes().to_vec();
        let mut pre_call;
        let pre: Option<&mut dyn FnMut() -> Result<()>> = match &f_preproc {
            Some(p) => {
                pre_call = {
                    let mut values: Vec<TVMValue> = args.values().to_vec();
                    let mut codes: Vec<i32> = args.codes().to_vec();
                    move || call_with(p, &mut values, &mut codes)
                };
                Some(&mut pre_call)
            }
            None => None,
        };
        let times = time_evaluate(
            &mut || call_with(&pf, &mut values, &mut codes),
            pre,
            dev,
            &cfg,
        )?;
        *rv = RetValue::Bytes(pack_f64(&times));
        Ok(())
    })
}

/// `runtime.RPCTimeEvaluator` for local modules: `(module or NULL, name, device_type,
/// device_id, number, repeat, min_repeat_ms, limit_zero_time_iterations,
/// cooldown_interval_ms, repeats_to_cooldown, cache_flush_bytes, f_preproc_name)`. The function
/// is looked up in the module and its imports, or in the global registry when the module is
/// NULL.
#[cfg(feature = "profiling")]
pub fn rpc_time_evaluator(args: Args<'_>) -> Result<Function> {
    const NAME: &str = "runtime.RPCTimeEvaluator";
    if args.len() < 10 {
        return Err(Error::value_fmt(format_args!(
            "{NAME} expects (module, func_name, device_type, device_id, number, repeat, \
             min_repeat_ms, limit_zero_time_iterations, cooldown_interval_ms, \
             repeats_to_cooldown[, cache_flush_bytes[, f_preproc_name]]) but got {} arguments",
            args.len()
        )));
    }
    let module = match args.object(0)? {
        None => None,
        Some(o) => Some(
            Module::from_object(o.to_ref()).map_err(|e| super::ctx(e, format_args!("{NAME}")))?,
        ),
    };
    let name = args.str(1)?;
    let dev = DLDevice::new(args.i64(2)? as i32, args.i64(3)? as i32);
    if dev.device_type >= crate::packed_func::types::RPC_SESS_MASK {
        return Err(Error::value_fmt(format_args!(
            "{NAME}: device type {} is a remote (RPC) device; RPC is not supported by this \
             runtime",
            dev.device_type
        )));
    }
    // number .. repeats_to_cooldown, then cache_flush_bytes when given.
    let mut v = [0i64; 7];
    for (k, x) in v
        .iter_mut()
        .enumerate()
        .take(if args.len() > 10 { 7 } else { 6 })
    {
        *x = args.i64(4 + k)?;
    }
    let cfg = TimeEvalConfig::from_values(&v, v[6]);
    cfg.validate()
        .map_err(|e| super::ctx(e, format_args!("{NAME}")))?;
    let preproc_name = if args.len() > 11 {
        match args.get(11)? {
            crate::packed_func::value::ArgValue::Null => "",
            _ => args.str(11)?,
        }
    } else {
        ""
    };
    let f_preproc = if preproc_name.is_empty() {
        None
    } else {
        Some(registry::get(preproc_name).ok_or_else(|| {
            Error::internal_fmt(format_args!(
                "{NAME}: cannot find the preprocessing function {preproc_name} in the global \
                 registry"
            ))
        })?)
    };
    let pf = match &module {
        Some(m) => m.get_function(name, true)?.ok_or_else(|| {
            Error::tvm_fmt(format_args!(
                "{NAME}: cannot find function {name} in the module (type {}) or its imports",
                m.type_key()
            ))
        })?,
        None => registry::get(name).ok_or_else(|| {
            Error::attribute_fmt(format_args!(
                "{NAME}: cannot find {name} in the global registry"
            ))
        })?,
    };
    device::api(dev).map_err(|e| super::ctx(e, format_args!("{NAME}")))?;
    Ok(wrap_time_evaluator(pf, dev, cfg, f_preproc))
}

/// Evicts every CPU-side tensor among `args[begin..]` from the CPU caches, line by line
/// (TVM's `cache_flush_cpu_non_first_arg` preprocessor, with `begin` = 1): measurements then
/// start from memory, as autotvm's `enable_cpu_cache_flush` asks. Other arguments are skipped.
#[cfg(all(feature = "profiling", feature = "graph"))]
pub fn cpu_cache_flush(args: &Args<'_>, begin: usize) -> Result<()> {
    use super::graph_executor::TensorArg;
    for i in begin..args.len() {
        let Ok(t) = TensorArg::from_arg(args.get(i)?, "cache_flush_cpu_non_first_arg") else {
            continue;
        };
        let t = t.dl();
        if t.device.device_type != crate::packed_func::types::DL_CPU || t.data.is_null() {
            continue;
        }
        let n = crate::ndarray::tensor_nbytes(t)?;
        // SAFETY: a live CPU tensor addresses `n` bytes from data + byte_offset.
        let start = unsafe { (t.data as *const u8).add(t.byte_offset as usize) };
        flush_range(start, n);
    }
    Ok(())
}

#[cfg(all(feature = "profiling", feature = "graph", target_arch = "x86_64"))]
fn flush_range(start: *const u8, n: usize) {
    const LINE: usize = 64;
    let mut p = start as usize & !(LINE - 1);
    let end = start as usize + n;
    while p < end {
        // SAFETY: `p` lies within a cache line that overlaps the tensor's bytes, which are
        // mapped; clflush only evicts the line. SSE2 is part of x86-64.
        unsafe { std::arch::x86_64::_mm_clflush(p as *const u8) };
        p += LINE;
    }
    // SAFETY: a plain fence instruction.
    unsafe { std::arch::x86_64::_mm_mfence() };
}

#[cfg(all(feature = "profiling", feature = "graph", not(target_arch = "x86_64")))]
fn flush_range(start: *const u8, n: usize) {
    // No portable cache-line eviction: read through a buffer larger than the usual last-level
    // cache instead, which pushes the tensor's lines out.
    let _ = (start, n);
    let junk = vec![1u8; 64 << 20];
    std::hint::black_box(junk.iter().map(|&b| b as u64).sum::<u64>());
}

#[cfg(test)]
mod tests {
    #[test]
    fn run_individual_packing() {
        assert_eq!(
            super::pack_run_individual(&[vec![1.0, 2.0], vec![]]),
            [2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 240, 63, 0, 0, 0, 0, 0, 0, 0, 64]
        );
    }
}
