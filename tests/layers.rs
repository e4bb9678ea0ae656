//! The rooms of `src/` and the order they are stacked in (the list in `src/lib.rs`): every
//! `crate::ROOM` path in a room's sources must name the room itself or one below it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The rooms, bottom-up, as `src/lib.rs` lists them: each numbered line of its crate docs
/// (`//! 1. [`a`] + [`b`], one room: ...`) names, before its colon, the modules of one room.
fn order() -> Vec<Vec<String>> {
    let lib =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).unwrap();
    let mut rooms = Vec::new();
    for line in lib.lines() {
        let Some(item) = line.strip_prefix("//! ") else {
            continue;
        };
        let Some((num, rest)) = item.split_once(". ") else {
            continue;
        };
        if num.is_empty() || !num.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        let head = rest.split(':').next().unwrap();
        let names: Vec<String> = head
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect();
        assert!(
            !names.is_empty(),
            "no room named in src/lib.rs line {line:?}"
        );
        rooms.push(names);
    }
    rooms
}

#[test]
fn lib_rs_lists_the_rooms() {
    let o = order();
    let flat: Vec<&str> = o.iter().flatten().map(String::as_str).collect();
    // `sync` (std's or loom's primitives) is below everything, then the core room.
    assert_eq!(flat.first(), Some(&"sync"), "{o:?}");
    assert_eq!(flat.get(1), Some(&"packed_func"), "{o:?}");
    assert_eq!(flat.last(), Some(&"c_api"), "{o:?}");
    for m in [
        "object",
        "module",
        "device",
        "ndarray",
        "threading",
        "executor",
    ] {
        assert!(
            flat.contains(&m),
            "{m} missing from src/lib.rs's list: {o:?}"
        );
    }
}

/// Crate-root items a room may name: the composition root the registry calls at start-up, and
/// the exported macros (each defined in, and standing for, the room named here).
const ROOT_ITEMS: &[(&str, &str)] = &[
    ("register_all", ""),
    ("bail", "packed_func"),
    ("ensure", "packed_func"),
    ("object_type", "object"),
    ("c_boundary", "c_api"),
];

fn level(order: &[Vec<String>], room: &str) -> Option<usize> {
    order.iter().position(|g| g.iter().any(|r| r == room))
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The room a source file belongs to: its first path component under `src/`.
fn room_of(rel: &Path) -> String {
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

/// Strips `//` comments (doc comments included) so that prose naming a room is not an edge.
fn code_only(src: &str) -> String {
    src.lines()
        .map(|l| match l.find("//") {
            // A `//` inside a string literal is rare enough here; "http://" is the one case.
            Some(i) if !l[..i].ends_with("http:") && !l[..i].ends_with("https:") => &l[..i],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every room named through `crate::X` or `use crate::{X, Y::..}` in `src`.
fn edges(src: &str) -> Vec<String> {
    let mut out = Vec::new();
    let code = code_only(src);
    let mut rest = code.as_str();
    while let Some(i) = rest.find("crate::") {
        // `$crate::` inside a macro names the defining room, like `crate::`.
        let after = &rest[i + "crate::".len()..];
        if let Some(group) = after.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            // Top-level names of the group: split on commas outside nested braces.
            let mut depth = 0;
            let mut start = 0;
            let g = &group[..end];
            for (k, c) in g.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.push(ident(&g[start..]));
                        start = k + 1;
                    }
                    _ => {}
                }
            }
            out.push(ident(&g[start..]));
        } else {
            out.push(ident(after));
        }
        rest = after;
    }
    out.retain(|s| !s.is_empty());
    out
}

/// Whether `body`'s last statement calls a function defined in `file` whose body runs inside
/// `crate::c_boundary!` from its start.
fn ends_in_boundary_call(file: &str, body: &str) -> bool {
    let tail = body.trim_end();
    let Some(open) = tail.rfind("unsafe {") else {
        return false;
    };
    let callee = ident(&tail[open + "unsafe {".len()..]);
    if callee.is_empty() || !tail.ends_with('}') {
        return false;
    }
    let Some(def) = file.find(&format!("fn {callee}(")) else {
        return false;
    };
    let after = &file[def..];
    let Some(open) = after.find("{\n") else {
        return false;
    };
    code_only(&after[open + 2..])
        .trim_start()
        .starts_with("crate::c_boundary!")
}

fn ident(s: &str) -> String {
    s.trim_start()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

#[test]
fn a_tail_call_into_a_boundary_is_recognised() {
    let file = "fn entry() {\n    fast();\n    unsafe {\n        general(1)\n    }\n}\n\
                fn general(x: i32) -> i32 {\n    crate::c_boundary! { Ok(()) }\n}\n\
                fn other(x: i32) -> i32 {\n    let y = x;\n    crate::c_boundary! { Ok(()) }\n}\n";
    let body = |callee: &str| format!("    fast();\n    unsafe {{\n        {callee}(1)\n    }}");
    assert!(ends_in_boundary_call(file, &body("general")));
    assert!(!ends_in_boundary_call(file, &body("other")));
    assert!(!ends_in_boundary_call(file, &body("missing")));
    assert!(!ends_in_boundary_call(file, "    fast();"));
}

#[test]
fn edges_are_parsed() {
    assert_eq!(
        edges("use crate::object::{A, B};\nlet x = crate::device::api(d);"),
        ["object", "device"]
    );
    assert_eq!(
        edges("use crate::{module::Module, ndarray};\n// crate::c_api in prose"),
        ["module", "ndarray"]
    );
}

#[test]
fn no_room_uses_a_room_above_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rs_files(&src, &mut files);
    files.sort();
    let mut bad: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut checked = 0;
    let order = order();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap();
        if rel == Path::new("lib.rs") {
            continue; // the crate root composes every room
        }
        let room = room_of(rel);
        let Some(here) = level(&order, &room) else {
            bad.entry(rel.display().to_string())
                .or_default()
                .push(format!("`{room}` is not a room listed in src/lib.rs"));
            continue;
        };
        let text = std::fs::read_to_string(f).unwrap();
        for target in edges(&text) {
            checked += 1;
            let target_room = match ROOT_ITEMS.iter().find(|(n, _)| *n == target) {
                Some((_, "")) if room == "packed_func" => continue,
                Some((_, "")) => {
                    bad.entry(rel.display().to_string())
                        .or_default()
                        .push(format!("names the crate root's `{target}`"));
                    continue;
                }
                Some((_, r)) => r.to_string(),
                None => target.clone(),
            };
            match level(&order, &target_room) {
                Some(there) if there <= here => {}
                Some(_) => bad
                    .entry(rel.display().to_string())
                    .or_default()
                    .push(format!(
                        "room `{room}` uses `{target_room}`, which is above it"
                    )),
                None => bad
                    .entry(rel.display().to_string())
                    .or_default()
                    .push(format!("uses `crate::{target}`, which is not a room")),
            }
        }
    }
    assert!(
        checked > 100,
        "only {checked} edges found: is the parser broken?"
    );
    assert!(
        bad.is_empty(),
        "room order broken (src/lib.rs lists the rooms bottom-up):\n{}",
        bad.iter()
            .map(|(f, v)| format!("  {f}: {}", v.join("; ")))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Every `#[no_mangle]` entry is in `src/c_api/` and its body runs inside `c_boundary!`; code
/// before the boundary is only a fast path switched by `bench-no-fast-paths` and listed in the
/// table of `src/c_api/mod.rs`.
#[test]
fn every_c_entry_runs_inside_the_boundary() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let table = std::fs::read_to_string(src.join("c_api/mod.rs")).unwrap();
    let mut files = Vec::new();
    rs_files(&src, &mut files);
    let mut entries = 0;
    let mut bad = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let rel = f.strip_prefix(&src).unwrap().display().to_string();
        let mut rest = text.as_str();
        while let Some(i) = rest.find("#[no_mangle]") {
            let line_start = rest[..i].rfind('\n').map_or(0, |n| n + 1);
            let in_comment = rest[line_start..i].trim_start().starts_with("//");
            rest = &rest[i + 1..];
            if in_comment {
                continue;
            }
            let sig = rest.find("fn ").expect("an entry after #[no_mangle]");
            let name = ident(&rest[sig + 3..]);
            entries += 1;
            if !rel.starts_with("c_api") {
                bad.push(format!("{rel}: {name} is an entry outside src/c_api/"));
                continue;
            }
            // The body: from the signature's `{` to the first line that is a lone `}`.
            let body_start = sig + rest[sig..].find("{\n").expect("a body") + 2;
            let body_end = body_start + rest[body_start..].find("\n}\n").expect("end of body");
            let body = &rest[body_start..body_end];
            let Some(b) = body.find("crate::c_boundary!") else {
                // A listed fast path may end in a call of a function of the same file whose
                // body is its boundary (so that the entry itself needs no stack frame); an
                // entry whose whole body is such a call shares that boundary body with others.
                let code = code_only(body);
                let only_the_call = code.trim_start().starts_with("unsafe {")
                    && code.matches("unsafe {").count() == 1;
                if !((table.contains(&format!("`{name}`")) || only_the_call)
                    && ends_in_boundary_call(&text, &code))
                {
                    bad.push(format!(
                        "{rel}: {name} does not run inside crate::c_boundary!"
                    ));
                }
                continue;
            };
            let prelude = code_only(&body[..b]);
            let mut prelude: String = prelude.split_whitespace().collect();
            // Binding the boundary's own result (`let x: T = crate::c_boundary! {..}`) is fine.
            if let Some(l) = prelude.rfind("let") {
                if prelude.ends_with('=') && !prelude[l..].contains(';') {
                    prelude.truncate(l);
                }
            }
            let harmless = prelude.is_empty() || prelude == "let_=nbytes;";
            let listed_fast_path = prelude
                .starts_with("#[cfg(not(feature=\"bench-no-fast-paths\"))]")
                && table.contains(&format!("`{name}`"));
            if !harmless && !listed_fast_path {
                bad.push(format!(
                    "{rel}: {name} runs code before its boundary that is not a listed fast path"
                ));
            }
        }
    }
    assert!(
        entries >= 56,
        "only {entries} entries found: is the parser broken?"
    );
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
