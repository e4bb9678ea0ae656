//! Fuzzes the `__tvm_dev_mblob` reader: any byte string must give a module tree or an error,
//! never a crash, hang or huge allocation.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::ffi::c_void;
use std::sync::Arc;
use tvm_runtime::module::blob::process_blob;
use tvm_runtime::module::library::Library;

struct NoSymbols;

impl Library for NoSymbols {
    fn symbol(&self, _name: &str) -> *mut c_void {
        std::ptr::null_mut()
    }
    fn describe(&self) -> String {
        "fuzz input".into()
    }
}

fuzz_target!(|data: &[u8]| {
    let _ = process_blob(data, Arc::new(NoSymbols), "fuzz input");
});
