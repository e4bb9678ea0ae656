//! The global functions tvmjs (TVM's JavaScript runtime, `@mlc-ai/web-runtime`) looks up
//! beside the runtime's own: `tvmjs.*` (parameter decoding, array concatenation) and the
//! `testing.*` helpers its tests call. Built with the `web` feature (the WebAssembly build,
//! scripts/build_wasm.sh), natively too so that they are tested there.

use crate::ndarray::{copy_from_bytes, NDArrayObj};
use crate::object::containers::ArrayObj;
use crate::object::ObjectRef;
use crate::packed_func::error::{Error, Result};
use crate::packed_func::function::{Function, PackedFuncObj};
use crate::packed_func::registry::Registrar;
use crate::packed_func::value::{ArgValue, Args, RetValue};
use std::ffi::c_void;

/// The value an argument holds, as a return value (objects gain a reference).
fn to_ret(v: ArgValue<'_>) -> RetValue {
    match v {
        ArgValue::Null => RetValue::Null,
        ArgValue::Int(i) => RetValue::Int(i),
        ArgValue::Float(f) => RetValue::Float(f),
        ArgValue::Bool(b) => RetValue::Bool(b),
        ArgValue::Handle(h) => RetValue::Handle(h),
        ArgValue::DataType(t) => RetValue::DataType(t),
        ArgValue::Device(d) => RetValue::Device(d),
        ArgValue::Str(s) => RetValue::Str(s.to_string_lossy().into_owned()),
        ArgValue::Bytes(b) => RetValue::Bytes(b.to_vec()),
        ArgValue::DLTensor(t) => RetValue::DLTensor(t),
        ArgValue::Object(o) => RetValue::Object(o.to_ref()),
    }
}

/// Calls `f` with the arguments `args[from..]`.
fn call_rest(f: &Function, args: &Args<'_>, from: usize, rv: &mut RetValue) -> Result<()> {
    let rest = args.rest(from);
    // SAFETY: the values and codes are the caller's, valid for the duration of this call.
    unsafe {
        f.obj().call_raw(
            rest.values().as_ptr() as *mut _,
            rest.codes().as_ptr() as *mut _,
            rest.len() as i32,
            rv,
        )
    }
}

/// `tvmjs.array.decode_storage(array, bytes, format, dtype)`: fills a CPU array from one
/// record of a weight shard, `f32-to-bf16` records widened back to float32.
fn decode_storage(a: Args<'_>) -> Result<()> {
    const NAME: &str = "tvmjs.array.decode_storage";
    a.expect_len(4, NAME)?;
    let arr = a.downcast::<NDArrayObj>(0)?;
    let bytes: &[u8] = match a.get(1)? {
        ArgValue::Bytes(b) => b,
        ArgValue::Str(s) => s.to_bytes(),
        v => {
            return Err(Error::type_error_fmt(format_args!(
                "{NAME}: argument 1 must be bytes, not {}",
                v.kind_name()
            )))
        }
    };
    let format = a.str(2)?;
    let dtype = a.str(3)?;
    let t = arr.dltensor();
    if format == "f32-to-bf16" && dtype == "float32" {
        let widened: Vec<u32> = bytes
            .chunks_exact(2)
            .map(|c| (u16::from_le_bytes([c[0], c[1]]) as u32) << 16)
            .collect();
        if bytes.len() % 2 != 0 || widened.len() * 4 != arr.nbytes() {
            return Err(Error::value_fmt(format_args!(
                "{NAME}: {} bfloat16 bytes cannot fill a float32 array of {} bytes",
                bytes.len(),
                arr.nbytes()
            )));
        }
        // SAFETY: the array is live; `widened` holds exactly its bytes (checked above).
        unsafe { copy_from_bytes(t, widened.as_ptr() as *const c_void, arr.nbytes()) }
    } else if format == "raw" || format == "f32-to-bf16" {
        // SAFETY: the array is live; the byte count is checked against it inside.
        unsafe { copy_from_bytes(t, bytes.as_ptr() as *const c_void, bytes.len()) }
            .map_err(|e| e.context(format!("{NAME} ({dtype})")))
    } else {
        Err(Error::value_fmt(format_args!(
            "{NAME}: unknown record format \"{format}\" (expected raw or f32-to-bf16)"
        )))
    }
}

/// Registers the tvmjs and testing globals.
pub(crate) fn register(r: &mut Registrar) {
    r.add("tvmjs.array.decode_storage", |a, _rv| decode_storage(a));
    r.add("tvmjs.runtime.ArrayConcat", |a, rv| {
        let mut items = Vec::new();
        for i in 0..a.len() {
            items.extend(a.downcast::<ArrayObj>(i)?.items.iter().cloned());
        }
        *rv = ArrayObj::new_ref(items).into();
        Ok(())
    });
    // A Rust panic inside a C entry point (what the WebAssembly build's unwinding strategy is
    // for): it must come out as an error, not a trap.
    r.add("testing.tvmrt_panic", |a, _rv| {
        a.expect_len(1, "testing.tvmrt_panic")?;
        panic!("{}", a.str(0)?)
    });
    for ns in ["testing", "tvmjs.testing"] {
        r.add(&format!("{ns}.echo"), |a, rv| {
            a.expect_len(1, "testing.echo")?;
            *rv = to_ret(a.get(0)?);
            Ok(())
        });
        r.add(&format!("{ns}.call"), |a, rv| {
            let f = Function::from_object(a.object_ref::<PackedFuncObj>(0)?)?;
            call_rest(&f, &a, 1, rv)
        });
        r.add(&format!("{ns}.ret_string"), |a, rv| {
            a.expect_len(1, "testing.ret_string")?;
            *rv = RetValue::Str(a.str(0)?.to_string());
            Ok(())
        });
        r.add(&format!("{ns}.log_info_str"), |a, _rv| {
            a.expect_len(1, "testing.log_info_str")?;
            println!("[INFO] {}", a.str(0)?);
            Ok(())
        });
        r.add(&format!("{ns}.add_one"), |a, rv| {
            a.expect_len(1, "testing.add_one")?;
            *rv = RetValue::Int(a.i64(0)? + 1);
            Ok(())
        });
        r.add(&format!("{ns}.wrap_callback"), |a, rv| {
            a.expect_len(1, "testing.wrap_callback")?;
            let f = Function::from_object(a.object_ref::<PackedFuncObj>(0)?)?;
            *rv = RetValue::Object(
                Function::from_rust(move |_a, _rv| f.call(&[]).map(drop)).into_object(),
            );
            Ok(())
        });
        r.add(&format!("{ns}.log_fatal_str"), |a, _rv| {
            a.expect_len(1, "testing.log_fatal_str")?;
            Err(Error::tvm(a.str(0)?))
        });
        r.add(&format!("{ns}.object_use_count"), |a, rv| {
            a.expect_len(1, "testing.object_use_count")?;
            let o: ObjectRef = match a.get(0)? {
                ArgValue::Object(o) => o.to_ref(),
                v => {
                    return Err(Error::type_error_fmt(format_args!(
                        "testing.object_use_count: expected an object, got {}",
                        v.kind_name()
                    )))
                }
            };
            // Less the reference taken here to read it.
            *rv = RetValue::Int(o.header().ref_count() as i64 - 1);
            Ok(())
        });
    }
}

#[cfg(test)]
mod tests {
    use crate::ndarray::NDArray;
    use crate::object::containers::{ArrayObj, StringObj};
    use crate::packed_func::function::Function;
    use crate::packed_func::registry;
    use crate::packed_func::value::{ArgValue, RetValue};

    fn global(name: &str) -> Function {
        registry::get(name).unwrap_or_else(|| panic!("{name} is registered"))
    }

    #[test]
    fn decode_storage_reads_raw_and_bfloat16_records() {
        let a = NDArray::from_slice(&[0f32; 3], &[3]).unwrap();
        let want = [1.5f32, -2.0, 0.25];
        let raw: Vec<u8> = want.iter().flat_map(|v| v.to_le_bytes()).collect();
        let arr = RetValue::Object(a.as_object().clone());
        let f = global("tvmjs.array.decode_storage");
        let args = |b: &[u8], fmt: &'static std::ffi::CStr| {
            f.call(&[
                arr.as_arg(),
                ArgValue::Bytes(b),
                ArgValue::Str(fmt),
                ArgValue::Str(c"float32"),
            ])
        };
        args(&raw, c"raw").unwrap();
        assert_eq!(a.to_vec::<f32>().unwrap(), want);
        let bf16: Vec<u8> = want
            .iter()
            .flat_map(|v| ((v.to_bits() >> 16) as u16).to_le_bytes())
            .collect();
        let b = NDArray::from_slice(&[0f32; 3], &[3]).unwrap();
        let barr = RetValue::Object(b.as_object().clone());
        f.call(&[
            barr.as_arg(),
            ArgValue::Bytes(&bf16),
            ArgValue::Str(c"f32-to-bf16"),
            ArgValue::Str(c"float32"),
        ])
        .unwrap();
        assert_eq!(b.to_vec::<f32>().unwrap(), want);
        let e = args(&raw[..5], c"raw").unwrap_err().to_string();
        assert!(e.contains("decode_storage"), "{e}");
        let e = args(&raw, c"zip").unwrap_err().to_string();
        assert!(e.contains("unknown record format"), "{e}");
    }

    #[test]
    fn array_concat_and_testing_helpers() {
        let s = |t: &str| Some(StringObj::new_ref(t));
        let x = RetValue::Object(ArrayObj::new_ref(vec![s("a"), s("b")]));
        let y = RetValue::Object(ArrayObj::new_ref(vec![s("c")]));
        let cat = global("tvmjs.runtime.ArrayConcat")
            .call(&[x.as_arg(), y.as_arg()])
            .unwrap()
            .into_object()
            .unwrap();
        assert_eq!(cat.downcast_ref::<ArrayObj>().unwrap().items.len(), 3);
        let echo = global("testing.echo");
        assert!(matches!(
            echo.call(&[ArgValue::Int(7)]).unwrap(),
            RetValue::Int(7)
        ));
        assert!(matches!(
            global("testing.add_one")
                .call(&[ArgValue::Int(41)])
                .unwrap(),
            RetValue::Int(42)
        ));
        let doubled = Function::from_rust(|a, rv| {
            *rv = RetValue::Int(a.i64(0)? * 2);
            Ok(())
        });
        let f = RetValue::Object(doubled.as_object().clone());
        let r = global("testing.call")
            .call(&[f.as_arg(), ArgValue::Int(21)])
            .unwrap();
        assert!(matches!(r, RetValue::Int(42)));
        let obj = StringObj::new_ref("counted");
        let held = RetValue::Object(obj.clone());
        let count = |v: &RetValue| match global("testing.object_use_count").call(&[v.as_arg()]) {
            Ok(RetValue::Int(n)) => n,
            other => panic!("{other:?}"),
        };
        let before = count(&held);
        let _extra = obj.clone();
        assert_eq!(count(&held), before + 1);
        let e = global("testing.add_one")
            .call(&[ArgValue::Int(1), ArgValue::Int(2)])
            .unwrap_err()
            .to_string();
        assert!(e.contains("testing.add_one"), "{e}");
    }
}
