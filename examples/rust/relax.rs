//! The safe Rust API on a Relax VM executable (a library built by `relax.build` and exported
//! with `export_library`): load it, initialise the VM on the CPU, call `main` on an NDArray.
//!
//! `cargo run --example relax_api -- path/to/relax_mlp.so` (x: float32[4, 64] -> softmax
//! float32[4, 10], from scripts/build_fixtures.py)

use tvm_runtime::relax_vm::VirtualMachine;
use tvm_runtime::{DLDevice, NDArray};

fn main() -> tvm_runtime::Result<()> {
    let Some(path) = std::env::args().nth(1) else {
        println!("pass a Relax library whose main takes x: float32[4, 64] (relax_mlp.so)");
        return Ok(());
    };
    let vm = VirtualMachine::load(&path)?;
    vm.init(&[DLDevice::CPU])?;
    println!("functions: {}", vm.functions().join(", "));
    println!("main({})", vm.param_names("main")?.join(", "));

    let x: Vec<f32> = (0..4 * 64).map(|i| (i as f32 * 0.1).sin()).collect();
    let out = vm.call("main", &[NDArray::from_slice(&x, &[4, 64])?])?;
    let y = out.flatten();
    let Some(probs) = y.first() else {
        println!("main returned no tensor: {out:?}");
        std::process::exit(1);
    };
    let v: Vec<f32> = probs.to_vec()?;
    let cols = *probs.shape().last().unwrap_or(&1) as usize;
    let mut ok = true;
    for (r, row) in v.chunks(cols).enumerate() {
        let sum: f32 = row.iter().sum();
        let best = row
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map_or(0, |(i, _)| i);
        println!("row {r}: argmax {best}, probabilities sum to {sum:.6}");
        ok &= (sum - 1.0).abs() < 1e-5;
    }
    if !ok {
        println!("WRONG: a softmax row does not sum to 1");
        std::process::exit(1);
    }
    Ok(())
}
