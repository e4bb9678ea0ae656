// Included by capi/build.rs (the C library) and build.rs (the runtime crate's examples): the
// linker arguments that put the runtime's stand-ins for std's default panic hook and default
// allocation-error hook (src/c_api/std_hooks.rs) in their place.

/// std's hooks that have a stand-in: the path inside std, as mangled names spell it, and the
/// stand-in's assembler name.
const STD_HOOKS: [(&str, &str); 2] = [
    ("9panicking12default_hook", "tvmrt_std_panic_hook"),
    ("5alloc24default_alloc_error_hook", "tvmrt_std_alloc_error_hook"),
];

/// `-Wl,--defsym=<std's symbol>=<stand-in>` for each hook of [`STD_HOOKS`], for the target
/// being built. std's symbols carry a hash of the toolchain's std, so they are read from the
/// target's `libstd-*.rlib`. Empty (std keeps its hooks, and its backtraces) outside Linux on
/// x86-64, aarch64, armv7 and riscv64, with `TVMRT_STD_HOOKS=0`, and where a symbol is not
/// found exactly once (a warning then says so).
///
/// Sets the cfg `tvmrt_std_hooks` when it returns arguments: the stand-ins' assembler names are
/// defined (and their test and example built) exactly then.
fn std_hook_link_args() -> Vec<String> {
    let args = find_std_hook_link_args();
    println!("cargo:rustc-check-cfg=cfg(tvmrt_std_hooks)");
    if !args.is_empty() {
        println!("cargo:rustc-cfg=tvmrt_std_hooks");
    }
    args
}

/// [`std_hook_link_args`] without the cfg.
fn find_std_hook_link_args() -> Vec<String> {
    println!("cargo:rerun-if-env-changed=TVMRT_STD_HOOKS");
    if std::env::var("TVMRT_STD_HOOKS").is_ok_and(|v| v == "0") {
        return Vec::new();
    }
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let arch = var("CARGO_CFG_TARGET_ARCH");
    if var("CARGO_CFG_TARGET_OS") != "linux"
        || !matches!(arch.as_str(), "x86_64" | "aarch64" | "arm" | "riscv64")
    {
        return Vec::new();
    }
    let Some(rlib) = std_rlib(&var("RUSTC"), &var("TARGET")) else {
        println!("cargo:warning=std's rlib not found: std keeps its default hooks");
        return Vec::new();
    };
    println!("cargo:rerun-if-changed={}", rlib.display());
    let Ok(bytes) = std::fs::read(&rlib) else {
        println!("cargo:warning=cannot read {}", rlib.display());
        return Vec::new();
    };
    let mut args = Vec::new();
    for (path, stand_in) in STD_HOOKS {
        match std_symbol(&bytes, path) {
            Some(symbol) => args.push(format!("-Wl,--defsym={symbol}={stand_in}")),
            None => {
                println!(
                    "cargo:warning=std's `{path}` not found once in {}: std keeps its default hooks",
                    rlib.display()
                );
                return Vec::new();
            }
        }
    }
    args
}

/// The target's `libstd-<hash>.rlib`, from `rustc --print target-libdir`.
fn std_rlib(rustc: &str, target: &str) -> Option<std::path::PathBuf> {
    let rustc = if rustc.is_empty() { "rustc" } else { rustc };
    let out = std::process::Command::new(rustc)
        .args(["--print", "target-libdir", "--target", target])
        .output()
        .ok()?;
    let dir = std::path::PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    let mut found = std::fs::read_dir(dir).ok()?.filter_map(|e| {
        let path = e.ok()?.path();
        let name = path.file_name()?.to_str()?;
        (name.starts_with("libstd-") && name.ends_with(".rlib")).then_some(path)
    });
    let rlib = found.next()?;
    found.next().is_none().then_some(rlib)
}

/// The one symbol naming the function at `path` in std (v0 mangling,
/// `_RNvNtCs<hash>_3std<path>`, or legacy, `_ZN3std<path>17h<16 hex digits>E`) among the
/// names in `bytes`; `None` when there is none or more than one.
fn std_symbol(bytes: &[u8], path: &str) -> Option<String> {
    let v0_tail = format!("_3std{path}");
    let legacy_head = format!("_ZN3std{path}17h");
    let mut found: Vec<&[u8]> = Vec::new();
    let names = bytes.split(|b| !(b.is_ascii_alphanumeric() || *b == b'_' || *b == b'$'));
    for name in names {
        let v0 = name.len() > 8 + v0_tail.len()
            && name.starts_with(b"_RNvNtCs")
            && name.ends_with(v0_tail.as_bytes())
            && name[8..name.len() - v0_tail.len()]
                .iter()
                .all(u8::is_ascii_alphanumeric);
        let legacy = name.len() == legacy_head.len() + 17
            && name.starts_with(legacy_head.as_bytes())
            && name.ends_with(b"E")
            && name[legacy_head.len()..name.len() - 1]
                .iter()
                .all(u8::is_ascii_hexdigit);
        if (v0 || legacy) && !found.contains(&name) {
            found.push(name);
        }
    }
    match found.as_slice() {
        [one] => String::from_utf8(one.to_vec()).ok(),
        _ => None,
    }
}
