//! The house's rules for `src/pg/`, checked on the source itself (plain
//! Rust tests, run by `cargo pgrx test` with every other unit test):
//!
//! - the rooms form a ladder: the order of `src/pg/mod.rs`'s list (top
//!   down) is the order of the picture in `CONTRIBUTING.md`, and every
//!   `crate::pg::` or `super::` path in a room's code names a room below
//!   it, so no import circle can form;
//! - no room is longer than 500 lines, but `errors.rs` (the one table of
//!   messages is its point);
//! - a PostgreSQL object that C writes in place (a condition variable, a
//!   spinlock, an LWLock, a latch) is never a plain field of a struct
//!   that Rust shares by `&`: it sits in an `UnsafeCell`, the one way Rust
//!   allows writes through a shared reference.
//!
//! Method calls on a type defined below (the lease's `impl Shared`, for
//! instance) are not imports and are not seen; the rooms that add methods
//! to `Shared` sit above `state`, which defines it, so every such call
//! still points down.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const MAX_LINES: usize = 500;
const LONG_ALLOWED: &[&str] = &["errors"];

/// The tree checked: this one, or `SF_HOUSE_ROOT` (to see the checks fail
/// on another checkout, such as one from before the ladder).
fn root() -> PathBuf {
    std::env::var_os("SF_HOUSE_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}

/// Every room of `src/pg/`: `registry/mod.rs` is `registry`,
/// `registry/worker.rs` is `registry::worker`.
fn rooms(dir: &Path, prefix: &str, out: &mut BTreeMap<String, PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("src/pg is readable")
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        if path.is_dir() {
            rooms(&path, &format!("{prefix}{stem}::"), out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let name = match stem {
                "mod" => prefix.trim_end_matches("::").to_string(),
                _ => format!("{prefix}{stem}"),
            };
            if !name.is_empty() {
                out.insert(name, path);
            }
        }
    }
}

/// The code of a file without its comments (line comments only: the
/// house writes no block comments) and without string literals' contents
/// being mistaken for paths (a path in a string is not an import).
fn code_of(text: &str) -> String {
    let mut code = String::new();
    for line in text.lines() {
        let mut in_string = false;
        let mut previous = ' ';
        let mut kept = String::new();
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if !in_string && c == '/' && chars.get(i + 1) == Some(&'/') {
                break;
            }
            if c == '"' && previous != '\\' {
                in_string = !in_string;
            } else if !in_string {
                kept.push(c);
            }
            previous = if previous == '\\' && c == '\\' {
                ' '
            } else {
                c
            };
            i += 1;
        }
        code.push_str(&kept);
        code.push('\n');
    }
    code
}

/// The paths a use tree (or a plain path) at the start of `s` names:
/// `a::b`, `a::{b, c::{d, e}}` (groups nested to any depth), `a as b` (the
/// alias dropped), each joined to `prefix`.
fn use_tree_paths(s: &str, prefix: &str) -> Vec<String> {
    fn skip_spaces(chars: &[char], i: &mut usize) {
        while *i < chars.len() && chars[*i] == ' ' {
            *i += 1;
        }
    }
    fn tree(chars: &[char], i: &mut usize, prefix: &str, out: &mut Vec<String>) {
        let mut path = prefix.to_string();
        loop {
            skip_spaces(chars, i);
            if chars.get(*i) == Some(&'{') {
                *i += 1;
                loop {
                    skip_spaces(chars, i);
                    match chars.get(*i) {
                        Some('}') => {
                            *i += 1;
                            return;
                        }
                        None => return,
                        _ => tree(chars, i, &path, out),
                    }
                    skip_spaces(chars, i);
                    match chars.get(*i) {
                        Some(',') => *i += 1,
                        Some('}') => {
                            *i += 1;
                            return;
                        }
                        _ => return,
                    }
                }
            }
            let start = *i;
            while *i < chars.len()
                && (chars[*i].is_alphanumeric() || chars[*i] == '_' || chars[*i] == '*')
            {
                *i += 1;
            }
            let segment: String = chars[start..*i].iter().collect();
            if segment.is_empty() {
                break;
            }
            path = if path.is_empty() {
                segment
            } else {
                format!("{path}::{segment}")
            };
            if chars.get(*i) == Some(&':') && chars.get(*i + 1) == Some(&':') {
                *i += 2;
            } else {
                break;
            }
        }
        // `x as y`: the alias names nothing new.
        let rest: String = chars[*i..].iter().take(4).collect();
        if rest.starts_with(" as ") {
            *i += 4;
            while *i < chars.len() && (chars[*i].is_alphanumeric() || chars[*i] == '_') {
                *i += 1;
            }
        }
        if !path.is_empty() && path != prefix {
            out.push(path);
        }
    }
    let chars: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    tree(&chars, &mut 0, prefix, &mut out);
    out
}

/// The rooms a file's code names: every path after `crate::` that goes
/// into `pg` (`crate::pg::a::b`, `crate::pg::{a, b::{c, d}}`,
/// `crate::{pg::a, core::x}`) and every path after `super::` (the parent
/// of the room's module: `pg` itself for `state` or `registry`, the
/// `registry` room for `registry::worker`), each resolved to the longest
/// room name it starts with. Naming the floor itself (`use crate::pg;`,
/// then `pg::x`) is reported as `crate::pg`, which no ladder holds: the
/// house asks for the room's name in every import.
fn imports(room: &str, code: &str, names: &[&String]) -> Vec<String> {
    let resolve = |path: &str| -> Option<String> {
        let parts: Vec<&str> = path.split("::").collect();
        (1..=parts.len())
            .rev()
            .map(|n| parts[..n].join("::"))
            .find(|candidate| names.contains(&candidate))
    };
    let parent = room.rsplit_once("::").map_or("", |(parent, _)| parent);
    let compact: String = code.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut found = Vec::new();
    for (base, prefix) in [("crate::", ""), ("super::", parent)] {
        let mut rest = compact.as_str();
        while let Some(at) = rest.find(base) {
            // Not part of a longer identifier (`my_super::`).
            let before = rest[..at].chars().last();
            rest = &rest[at + base.len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            for path in use_tree_paths(rest, "") {
                let in_pg = if base == "crate::" {
                    match path.strip_prefix("pg::") {
                        Some(inner) => inner.to_string(),
                        None if path == "pg" => {
                            found.push("crate::pg".to_string());
                            continue;
                        }
                        None => continue,
                    }
                } else if prefix.is_empty() {
                    path
                } else {
                    format!("{prefix}::{path}")
                };
                found.extend(resolve(&in_pg));
            }
        }
    }
    found.retain(|name| name != room);
    found.sort();
    found.dedup();
    found
}

/// The ladder, top down: every room named in backticks and brackets in the
/// list of `src/pg/mod.rs`'s opening comment, in the order of first mention.
fn ladder_of_mod_rs(text: &str) -> Vec<String> {
    let mut order = Vec::new();
    for line in text.lines().take_while(|l| l.starts_with("//!")) {
        let mut rest = line;
        while let Some(at) = rest.find("[`") {
            rest = &rest[at + 2..];
            let end = rest.find("`]").unwrap_or(rest.len());
            let name = rest[..end].to_string();
            if !name.contains("crate::") && !order.contains(&name) {
                order.push(name);
            }
            rest = &rest[end..];
        }
    }
    order
}

/// The rooms of `src/pg/` in the order `CONTRIBUTING.md`'s picture lists
/// them (its `pg/` block: `name.rs` files, and `registry/` with its
/// files).
fn ladder_of_contributing(text: &str) -> Vec<String> {
    let mut order = Vec::new();
    let mut in_pg = false;
    // The directory whose files the picture lists (`registry/`).
    let mut dir: Option<String> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        if trimmed.starts_with("pg/") && indent == 2 {
            in_pg = true;
            continue;
        }
        if in_pg && indent <= 2 && !trimmed.is_empty() {
            break;
        }
        if !in_pg {
            continue;
        }
        let first = trimmed.split_whitespace().next().unwrap_or("");
        if indent == 4 {
            dir = first.strip_suffix('/').map(str::to_string);
        }
        for word in trimmed.split(|c: char| c.is_whitespace() || c == ',' || c == ';') {
            if let Some(stem) = word.strip_suffix(".rs") {
                let name = match (&dir, stem) {
                    (Some(dir), "mod") => dir.clone(),
                    (Some(dir), stem) => format!("{dir}::{stem}"),
                    (None, stem) => stem.to_string(),
                };
                if !order.contains(&name) {
                    order.push(name);
                }
            }
        }
    }
    order
}

/// The first import that does not point down the ladder, if any.
fn upward_import(ladder: &[String], edges: &BTreeMap<String, Vec<String>>) -> Option<String> {
    let rank = |name: &str| ladder.iter().position(|n| n == name);
    for (from, tos) in edges {
        for to in tos {
            match (rank(from), rank(to)) {
                (Some(a), Some(b)) if a < b => {}
                _ => return Some(format!("{from} -> {to}")),
            }
        }
    }
    None
}

/// A cycle among the imports, as a path, if there is one.
fn cycle(edges: &BTreeMap<String, Vec<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        edges: &BTreeMap<String, Vec<String>>,
        path: &mut Vec<String>,
        done: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut found = path[at..].to_vec();
            found.push(node.to_string());
            return Some(found);
        }
        if done.iter().any(|n| n == node) {
            return None;
        }
        path.push(node.to_string());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, edges, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.push(node.to_string());
        None
    }
    let mut done = Vec::new();
    edges
        .keys()
        .find_map(|node| visit(node, edges, &mut Vec::new(), &mut done))
}

fn pg_imports() -> (BTreeMap<String, PathBuf>, BTreeMap<String, Vec<String>>) {
    let mut files = BTreeMap::new();
    rooms(&root().join("src/pg"), "", &mut files);
    let names: Vec<&String> = files.keys().collect();
    let edges = files
        .iter()
        .map(|(room, path)| {
            let text = std::fs::read_to_string(path).expect("a room is readable");
            (room.clone(), imports(room, &code_of(&text), &names))
        })
        .collect();
    (files, edges)
}

#[test]
fn pg_rooms_form_a_ladder_in_the_documented_order() {
    let (files, edges) = pg_imports();
    assert_eq!(cycle(&edges), None, "an import circle in src/pg/");
    let mod_rs = std::fs::read_to_string(root().join("src/pg/mod.rs")).expect("mod.rs");
    let ladder = ladder_of_mod_rs(&mod_rs);
    let mut listed = ladder.clone();
    listed.sort();
    let mut present: Vec<String> = files.keys().filter(|n| !n.is_empty()).cloned().collect();
    present.sort();
    assert_eq!(listed, present, "src/pg/mod.rs lists every room once");
    assert_eq!(
        upward_import(&ladder, &edges),
        None,
        "an import up the ladder of src/pg/mod.rs"
    );
    let contributing =
        std::fs::read_to_string(root().join("CONTRIBUTING.md")).expect("CONTRIBUTING.md");
    assert_eq!(
        ladder_of_contributing(&contributing),
        ladder,
        "CONTRIBUTING.md's picture lists src/pg/'s rooms in mod.rs's order"
    );
    // The check sees real imports (a parser that saw none would pass).
    assert!(edges["backend"].contains(&"state".to_string()));
    assert!(edges["registry::worker"].contains(&"registry".to_string()));
    assert!(edges["registry::worker"].contains(&"registry::libpq".to_string()));
}

#[test]
fn pg_rooms_stay_short() {
    let (files, _) = pg_imports();
    for (room, path) in files {
        let lines = std::fs::read_to_string(&path)
            .expect("a room")
            .lines()
            .count();
        assert!(
            lines <= MAX_LINES || LONG_ALLOWED.contains(&room.as_str()),
            "{} has {lines} lines (at most {MAX_LINES}): split it by job",
            path.display()
        );
    }
}

#[test]
fn the_checks_see_circles_and_upward_imports() {
    let names: Vec<String> = ["a", "b", "c", "dir", "dir::x"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let refs: Vec<&String> = names.iter().collect();
    let code = code_of(
        "use crate::pg::b::{thing, other};\n// use crate::pg::c;\nlet s = \"crate::pg::c\";\nuse crate::pg::{c as see, dir::x};\nsuper_fn(); not_crate::pg::a;\n",
    );
    assert_eq!(imports("a", &code, &refs), vec!["b", "c", "dir::x"]);
    assert_eq!(
        imports("dir::x", "use super::{thing, x}; crate::pg::a::f()", &refs),
        vec!["a", "dir"]
    );
    // Nested groups, `crate::{pg::...}`, and `super::` of a top-level room.
    assert_eq!(
        imports(
            "a",
            "use crate::pg::{b::{x, y}, dir::{self, x as z}, c};",
            &refs
        ),
        vec!["b", "c", "dir", "dir::x"]
    );
    assert_eq!(
        imports("a", "use crate::{core::q, pg::{b, c::d}};", &refs),
        vec!["b", "c"]
    );
    assert_eq!(
        imports("dir", "use super::{b, c::f};", &refs),
        vec!["b", "c"]
    );
    assert_eq!(
        imports("a", "use crate::pg; pg::b::f();", &refs),
        vec!["crate::pg"]
    );
    let edges = |pairs: &[(&str, &str)]| {
        let mut map: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (from, to) in pairs {
            map.entry(from.to_string())
                .or_default()
                .push(to.to_string());
        }
        map
    };
    let circle = edges(&[("a", "b"), ("b", "c"), ("c", "a")]);
    assert_eq!(
        cycle(&circle),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
    assert_eq!(cycle(&edges(&[("a", "b"), ("a", "c"), ("b", "c")])), None);
    let ladder: Vec<String> = vec!["a".into(), "b".into(), "c".into()];
    assert_eq!(
        upward_import(&ladder, &edges(&[("a", "c"), ("b", "c")])),
        None
    );
    assert_eq!(
        upward_import(&ladder, &edges(&[("a", "b"), ("c", "b")])),
        Some("c -> b".into())
    );
    let picture = "src/\n  pg/   the floor\n    a.rs   x\n    dir/   d: mod.rs the claim;\n           x.rs the rest\n    b.rs\n  sql/\n    z.rs\n";
    assert_eq!(
        ladder_of_contributing(picture),
        vec!["a", "dir", "dir::x", "b"]
    );
}

/// The C types PostgreSQL writes in place through a pointer it is given.
const WRITTEN_BY_C: &[&str] = &[
    "ConditionVariable",
    "slock_t",
    "LWLock",
    "LWLockPadded",
    "Latch",
];

/// The fields of `code` (one room's code, comments removed) declared with a
/// type C writes in place and not wrapped in an `UnsafeCell` (or a pointer).
fn plain_c_written_fields(code: &str) -> Vec<String> {
    code.lines()
        .filter_map(|line| {
            let (name, ty) = line.trim().trim_end_matches(',').split_once(':')?;
            let name = name
                .trim()
                .trim_start_matches("pub(super)")
                .trim_start_matches("pub");
            let name = name.trim();
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return None;
            }
            let ty = ty.trim();
            WRITTEN_BY_C
                .iter()
                .any(|c| ty == format!("pg_sys::{c}") || ty == *c)
                .then(|| format!("{name}: {ty}"))
        })
        .collect()
}

#[test]
fn objects_c_writes_in_place_sit_in_an_unsafe_cell() {
    let (files, _) = pg_imports();
    for (_, path) in files {
        let code = code_of(&std::fs::read_to_string(&path).expect("a room"));
        let plain = plain_c_written_fields(&code);
        assert!(
            plain.is_empty(),
            "{}: {plain:?}: C writes these in place through a pointer made from a shared reference; wrap each in an UnsafeCell",
            path.display()
        );
    }
    // The check sees the field as `state.rs` declared it before the fix, and
    // passes what C may write.
    assert_eq!(
        plain_c_written_fields("    pub(super) lease_raised: pg_sys::ConditionVariable,\n    lock: *mut pg_sys::LWLock,\n    cv: UnsafeCell<pg_sys::ConditionVariable>,\n"),
        vec!["lease_raised: pg_sys::ConditionVariable".to_string()]
    );
}
