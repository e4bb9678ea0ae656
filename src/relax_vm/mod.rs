//! The Relax virtual machine: runs the executables `relax.build` / `tvm.compile` produce
//! (TVM v0.14–v0.20).
//!
//! - [`exec`]: the executable format (parser, writer, statistics);
//! - [`bytecode`]: instruction decoding, validation and disassembly;
//! - [`interp`]: the interpreter (frames, registers, closures, the VM context);
//! - [`vm_module`]: the executable and VM modules and their loaders;
//! - `builtins`: the `vm.builtin.*` functions executables call;
//! - [`memory`]: `vm.Storage` and the naive and pooled allocators;
//! - [`report`]: `runtime.profiling.Report` (from the profilers' JSON, as tables);
//! - `sort`: the `tvm.contrib.sort.*` externs compiled CPU kernels call;
//! - [`api`]: the safe Rust face, [`VirtualMachine`].

pub mod api;
mod builtins;
pub mod bytecode;
pub mod exec;
pub mod interp;
#[cfg(feature = "llm")]
pub mod llm;
pub mod memory;
pub mod report;
mod sort;
pub mod vm_module;

pub use api::VirtualMachine;

use crate::packed_func::confine;
use crate::packed_func::error::Error;
use crate::packed_func::registry::Registrar;
use crate::packed_func::value::RetValue;

/// Registers the loaders, builtins and helpers of the Relax VM.
pub(crate) fn register(r: &mut Registrar) {
    // Type keys known from the start, so that frontends resolve them when they import.
    use crate::object::ObjectType;
    interp::ClosureObj::type_index();
    memory::StorageObj::type_index();
    report::ReportObj::type_index();
    for key in ["relax.Executable", "relax.VMExecutable"] {
        r.add(&format!("runtime.module.loadbinary_{key}"), move |a, rv| {
            *rv = RetValue::Object(vm_module::load_binary(a, key)?.into_object());
            Ok(())
        });
        r.add(&format!("runtime.module.loadfile_{key}"), move |a, rv| {
            let file = confine::resolve_str(a.str(0)?, "runtime.module.loadfile_relax")?;
            *rv = RetValue::Object(vm_module::load_executable_file(&file, key)?.into_object());
            Ok(())
        });
    }
    r.add("relax.ExecutableLoadFromFile", |a, rv| {
        let path = confine::resolve_str(a.str(0)?, "relax.ExecutableLoadFromFile")?;
        *rv = RetValue::Object(
            vm_module::load_executable_file(&path, "relax.Executable")
                .map_err(|e: Error| e.context("relax.ExecutableLoadFromFile"))?
                .into_object(),
        );
        Ok(())
    });
    builtins::register(r);
    sort::register(r);
    report::register(r);
    #[cfg(feature = "llm")]
    llm::register(r);
}
