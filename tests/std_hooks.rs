//! The stand-ins for std's default panic and allocation-error hooks, as linked in place of
//! std's (examples/std_hooks.rs, built by `cargo test` with the C library's link arguments):
//! a caught panic prints its location and message and no backtrace, even with
//! `RUST_BACKTRACE=1`; an allocation failure prints its size and aborts.
#[path = "common/skip.rs"]
mod skip;

/// Where the stand-ins are linked (cfg `tvmrt_std_hooks`, set by capi/build_std_hooks.rs);
/// elsewhere std keeps its hooks and there is nothing to test.
#[cfg(tvmrt_std_hooks)]
mod stand_ins {
    use super::skip;
    use std::os::unix::process::ExitStatusExt;
    use std::path::PathBuf;
    use std::process::{Command, Output};

    /// The example's binary, beside this test's (`<profile>/deps/..` → `<profile>/examples/`).
    fn example() -> Option<PathBuf> {
        let exe = std::env::current_exe().ok()?;
        let path = exe.parent()?.parent()?.join("examples").join("std_hooks");
        path.is_file().then_some(path)
    }

    fn run(mode: &str, backtrace: &str) -> Option<Output> {
        let Some(bin) = example() else {
            skip::report("examples/std_hooks is not built (`cargo test` builds it; `--test std_hooks` alone does not)");
            return None;
        };
        Some(
            Command::new(bin)
                .arg(mode)
                .env("RUST_BACKTRACE", backtrace)
                .output()
                .expect("running examples/std_hooks"),
        )
    }

    #[test]
    fn a_panic_prints_its_location_and_message_and_no_backtrace() {
        for backtrace in ["0", "1", "full"] {
            let Some(out) = run("panic", backtrace) else {
                return;
            };
            assert!(out.status.success(), "{out:?}");
            assert_eq!(String::from_utf8_lossy(&out.stdout), "caught: true\n");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                err.starts_with("panicked at examples/std_hooks.rs:")
                    && err.ends_with(":\nexample panic 7\n")
                    && err.lines().count() == 2,
                "RUST_BACKTRACE={backtrace}: std's hook ran, not the stand-in: {err:?}"
            );
        }
    }

    #[test]
    fn an_allocation_failure_prints_its_size_and_aborts() {
        let Some(out) = run("alloc", "1") else {
            return;
        };
        assert_eq!(out.status.signal(), Some(libc::SIGABRT), "{out:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            "memory allocation of 1099511627776 bytes failed\n"
        );
    }
}
