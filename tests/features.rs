//! The feature cuts: the table that names a missing feature is consistent with the build and
//! with Cargo.toml, `runtime.BuiltFeatures` lists what was built, and asking for something a
//! left-out feature provides names that feature (those checks run on builds without it, e.g.
//! `--no-default-features --features deploy`).

use tvm_runtime::object::containers::{ArrayObj, StringObj};
use tvm_runtime::packed_func::features::{self, FEATURES, PREFIXES};
use tvm_runtime::packed_func::registry;
use tvm_runtime::Function;

/// The features Cargo.toml declares.
fn cargo_features() -> Vec<String> {
    let toml = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml")).unwrap();
    let section = toml
        .split("\n[features]\n")
        .nth(1)
        .expect("a [features] section");
    let section = section.split("\n[").next().unwrap();
    section
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once(" = "))
        .map(|(k, _)| k.trim().to_string())
        .collect()
}

#[test]
fn the_table_names_only_features_cargo_declares() {
    let declared = cargo_features();
    for (f, _) in FEATURES {
        assert!(
            declared.iter().any(|d| d == f),
            "{f} is not a Cargo feature: {declared:?}"
        );
    }
    for (prefix, f) in PREFIXES {
        assert!(
            FEATURES.iter().any(|(n, _)| n == f),
            "the prefix {prefix} maps to {f}, which is not in FEATURES"
        );
    }
    for set in ["default", "cpu", "deploy", "minimal"] {
        assert!(declared.iter().any(|d| d == set), "no feature set {set}");
    }
}

#[test]
fn every_prefix_of_a_built_feature_names_registered_functions() {
    // A prefix whose feature is built must match something the build registers; a prefix that
    // matches nothing is stale (a renamed function would then get a bare "not found" when cut).
    let names = registry::list_names();
    let mut stale = Vec::new();
    for (prefix, f) in PREFIXES {
        if !features::has(f) {
            continue;
        }
        if !names.iter().any(|n| n.starts_with(prefix)) {
            stale.push(format!("{prefix} ({f})"));
        }
        assert_eq!(features::missing(prefix), None, "{prefix}: {f} is built");
    }
    assert!(
        stale.is_empty(),
        "no registered function starts with: {stale:?}"
    );
}

#[test]
fn built_features_lists_this_build() {
    let rv = Function::get_global("runtime.BuiltFeatures")
        .unwrap()
        .call(&[])
        .unwrap();
    let o = rv.into_object().unwrap();
    let list: Vec<String> = o
        .downcast_ref::<ArrayObj>()
        .expect("an array")
        .items
        .iter()
        .map(|i| {
            i.as_ref()
                .and_then(|s| s.downcast_ref::<StringObj>())
                .expect("strings")
                .as_str()
                .to_string()
        })
        .collect();
    let expect: Vec<&str> = FEATURES
        .iter()
        .filter(|(_, on)| *on)
        .map(|(n, _)| *n)
        .collect();
    assert_eq!(list, expect);
    assert_eq!(cfg!(feature = "rpc"), list.iter().any(|n| n == "rpc"));
    assert_eq!(cfg!(feature = "graph"), list.iter().any(|n| n == "graph"));
}

#[test]
fn every_left_out_feature_is_named_when_its_functions_are_asked_for() {
    for (prefix, f) in PREFIXES {
        if features::has(f) {
            continue;
        }
        let e = Function::get_global(prefix)
            .err()
            .unwrap_or_else(|| panic!("{prefix} is registered, but {f} is not built"));
        assert!(
            e.to_string().contains(&format!("built without `{f}`")),
            "{prefix}: {e}"
        );
    }
}

#[cfg(not(feature = "rpc"))]
#[test]
fn rpc_functions_name_the_missing_feature() {
    assert!(!registry::contains("rpc.Connect"));
    let e = Function::get_global("rpc.Connect").err().unwrap();
    assert!(e.to_string().contains("built without `rpc`"), "{e}");
}

#[cfg(not(feature = "relax"))]
#[test]
fn relax_loaders_name_the_missing_feature() {
    let e = Function::get_global("runtime.module.loadbinary_relax.VMExecutable")
        .err()
        .unwrap();
    assert!(e.to_string().contains("built without `relax`"), "{e}");
}

#[cfg(not(feature = "dso"))]
#[test]
fn shared_libraries_name_the_missing_feature() {
    let e = tvm_runtime::Module::load("/nonexistent/model.so")
        .err()
        .unwrap();
    assert!(e.to_string().contains("built without `dso`"), "{e}");
}

#[cfg(not(feature = "cuda"))]
#[test]
fn cuda_devices_name_the_missing_feature() {
    let dev = tvm_runtime::DLDevice::new(tvm_runtime::packed_func::types::DL_CUDA, 0);
    let e = tvm_runtime::device::api(dev).err().unwrap();
    assert!(e.to_string().contains("built without `cuda`"), "{e}");
}

#[cfg(not(feature = "threads"))]
#[test]
fn without_threads_a_launch_is_one_task() {
    assert_eq!(tvm_runtime::threading::num_threads(), 1);
    let e = tvm_runtime::threading::config_threadpool(0, 4, &[]).unwrap_err();
    assert!(e.to_string().contains("built without `threads`"), "{e}");
}

#[cfg(not(feature = "plugins"))]
#[test]
fn plugins_name_the_missing_feature() {
    let e = tvm_runtime::device::plugin::load_library("/nonexistent/plugin.so").unwrap_err();
    assert!(e.to_string().contains("built without `plugins`"), "{e}");
}

#[cfg(not(feature = "profiling"))]
#[test]
fn profiling_names_the_missing_feature() {
    for name in ["runtime.RPCTimeEvaluator", "runtime.profiling.AsTable"] {
        let e = Function::get_global(name).unwrap_err();
        assert!(e.to_string().contains("built without `profiling`"), "{e}");
    }
}

/// The lines of a Cargo.toml section, without comments and blank lines.
fn toml_section(path: &str, name: &str) -> Vec<String> {
    let toml = std::fs::read_to_string(path).unwrap();
    let section = toml
        .split(&format!("\n[{name}]\n"))
        .nth(1)
        .unwrap_or_else(|| panic!("{path}: no [{name}] section"));
    section
        .split("\n[")
        .next()
        .unwrap()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect()
}

/// The C library's package compiles the runtime's sources itself (capi/Cargo.toml): its
/// dependencies, features and lints must be the root package's.
#[test]
fn the_c_library_builds_the_sources_as_the_root_package_does() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let capi = concat!(env!("CARGO_MANIFEST_DIR"), "/capi/Cargo.toml");
    for section in ["dependencies", "features", "lints.rust", "lints.clippy"] {
        assert_eq!(
            toml_section(root, section),
            toml_section(capi, section),
            "[{section}] of capi/Cargo.toml differs from the root package's"
        );
    }
}
