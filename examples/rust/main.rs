//! The crate's safe Rust API: load a TVM-compiled library, call a kernel on NDArrays, and call
//! a Rust closure registered as a global PackedFunc.
//!
//! `cargo run --example rust_api -- path/to/add_static.so`

use tvm_runtime::packed_func::registry;
use tvm_runtime::{ArgValue, Function, Module, NDArray, RetValue};

fn main() -> tvm_runtime::Result<()> {
    registry::register_rust("example.scale", |args, rv| {
        *rv = RetValue::Float(args.f64(0)? * args.f64(1)?);
        Ok(())
    });
    let scale = Function::get_global("example.scale")?;
    let r = scale.call(&[ArgValue::Float(1.5), ArgValue::Int(4)])?;
    println!("example.scale(1.5, 4) = {r:?}");

    let Some(path) = std::env::args().nth(1) else {
        println!("pass a library exporting myadd(A, B, C) (float32) to run a compiled kernel");
        return Ok(());
    };
    let lib = Module::load(&path)?;
    let myadd = lib.function("myadd")?;
    let n = 1024usize;
    let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let b: Vec<f32> = (0..n).map(|i| (2 * i) as f32).collect();
    let (ta, tb) = (
        NDArray::from_slice(&a, &[n as i64])?,
        NDArray::from_slice(&b, &[n as i64])?,
    );
    let tc = NDArray::empty(&[n as i64], ta.dtype(), ta.device())?;
    myadd.call(&[(&ta).into(), (&tb).into(), (&tc).into()])?;
    let c: Vec<f32> = tc.to_vec()?;
    let ok = c.iter().enumerate().all(|(i, &v)| v == a[i] + b[i]);
    println!(
        "myadd over {n} elements: {}",
        if ok { "correct" } else { "WRONG" }
    );
    if !ok {
        std::process::exit(1);
    }
    Ok(())
}
