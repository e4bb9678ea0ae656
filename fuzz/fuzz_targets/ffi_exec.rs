//! Fuzzes the rewriter of Relax executables written by TVM v0.22+ (as a tvm-ffi library's
//! `relax.VMExecutable` entry holds them) into the classic form, and the classic parser behind
//! it: any byte string must give an executable or an error, never a crash, hang or an
//! allocation larger than the input justifies.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tvm_runtime::module::tvm_ffi::vm_exec::to_classic;
use tvm_runtime::relax_vm::exec::Executable;

fuzz_target!(|data: &[u8]| {
    let Ok(classic) = to_classic(data, "fuzz input") else {
        return;
    };
    if let Ok(exec) = Executable::load(&classic) {
        let saved = exec.save().expect("a parsed executable saves");
        assert_eq!(
            Executable::load(&saved).expect("reloads").save().unwrap(),
            saved
        );
    }
});
