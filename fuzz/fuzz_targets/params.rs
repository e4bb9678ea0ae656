//! Fuzzes the parameter reader (`runtime.LoadParams`, the `.params` format): any byte string
//! must give named arrays or an error, never a crash, hang or an allocation larger than the
//! input justifies; what loads must save back to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tvm_runtime::executor::params::{load_params, save_params};

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = load_params(data) {
        let again = save_params(&p).expect("loaded parameters save");
        let back = load_params(&again).expect("saved parameters load");
        assert_eq!(p.len(), back.len());
        for ((n1, a1), (n2, a2)) in p.iter().zip(&back) {
            assert_eq!(n1, n2);
            assert_eq!(a1.shape(), a2.shape());
            assert_eq!(a1.dtype(), a2.dtype());
        }
    }
});
