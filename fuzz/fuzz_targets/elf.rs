//! Fuzzes the ELF check that runs before the dynamic loader opens a library
//! (`module::elf_check`): any byte string must be accepted or refused with an error that
//! names the file, never a crash or a hang.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tvm_runtime::module::elf_check::check_bytes;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = check_bytes("fuzz.so", data) {
        assert!(e.message.contains("fuzz.so"), "{}", e.message);
    }
});
