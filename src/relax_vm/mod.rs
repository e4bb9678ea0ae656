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
#[cfg(feature = "profiling")]
pub mod report;
mod sort;
pub mod vm_module;

pub use api::VirtualMachine;

use crate::packed_func::confine;
use crate::packed_func::error::{Error, Result};
use crate::packed_func::registry::Registrar;
use crate::packed_func::value::{Args, RetValue};

/// Registers the loaders, builtins and helpers of the Relax VM.
pub(crate) fn register(r: &mut Registrar) {
    // Type keys known from the start, so that frontends resolve them when they import.
    use crate::object::ObjectType;
    interp::ClosureObj::type_index();
    memory::StorageObj::type_index();
    #[cfg(feature = "profiling")]
    report::ReportObj::type_index();
    // The two type keys' loaders: plain functions over one body each.
    fn loadbinary(a: Args<'_>, rv: &mut RetValue, key: &'static str) -> Result<()> {
        *rv = RetValue::Object(vm_module::load_binary(a, key)?.into_object());
        Ok(())
    }
    fn loadfile(a: Args<'_>, rv: &mut RetValue, key: &'static str) -> Result<()> {
        let file = confine::resolve_str(a.str(0)?, "runtime.module.loadfile_relax")?;
        *rv = RetValue::Object(vm_module::load_executable_file(&file, key)?.into_object());
        Ok(())
    }
    r.add("runtime.module.loadbinary_relax.Executable", |a, rv| {
        loadbinary(a, rv, "relax.Executable")
    });
    r.add("runtime.module.loadfile_relax.Executable", |a, rv| {
        loadfile(a, rv, "relax.Executable")
    });
    r.add("runtime.module.loadbinary_relax.VMExecutable", |a, rv| {
        loadbinary(a, rv, "relax.VMExecutable")
    });
    r.add("runtime.module.loadfile_relax.VMExecutable", |a, rv| {
        loadfile(a, rv, "relax.VMExecutable")
    });
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
    #[cfg(feature = "profiling")]
    report::register(r);
    #[cfg(feature = "llm")]
    llm::register(r);
}
