//! The maintainer's map in `nika-retry/src/lib.rs` ("The kernel"), held
//! against the code: the modules by floor, each importing only from its
//! own floor and the ones below it but for the imports the map names, and
//! every thread-local and changing static of the crate in `ambient/` but
//! those the map names beside their types, each listed in `ambient`'s table.
//! Read from the sources as text: `use crate::…` trees and `crate::…`
//! paths outside comments and outside test code.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The crate's modules from the ground up, as the map lists them. A module
/// imports from its own floor and the floors below; the modules of a floor
/// know nothing of each other's insides unless the map says so.
const FLOORS: &[&[&str]] = &[
    &["vocab", "serde_impl", "schema_impl", "schema", "tonic_impl"],
    &["engine"],
    &["time"],
    &["events"],
    &["metrics"],
    &["ambient"],
    &["connect", "task", "attempt"],
    &["http"],
    &["upstream"],
    &["run"],
    &["stream"],
    &["adapter"],
    &["tower", "reqwest_middleware"],
    &["private"],
];

/// The imports that run back up, as the map names them: the importing
/// file and the module it imports from. None today; one named here must
/// have its why in the map.
const BACK_UP: &[(&str, &str)] = &[];

/// The thread-locals and changing statics outside `ambient/`, as the map
/// names them: two places beside the module they serve, so that no import
/// runs back up, and `metrics`' instruments, made once per process
/// (feature `opentelemetry`).
const OUTSIDE_AMBIENT: [&str; 3] = [
    "events/observers.rs",
    "upstream/handle.rs",
    "metrics/instruments.rs",
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("nika-retry/src")
}

/// Every source file of the crate but its test files, as `(path from
/// src/, text without comments and test code)`.
fn sources() -> Vec<(String, String)> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<(String, String)>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .expect("a source folder")
            .map(|e| e.expect("an entry").path())
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(&path, root, out);
                continue;
            }
            let rel = path
                .strip_prefix(root)
                .expect("under src/")
                .to_string_lossy()
                .replace('\\', "/");
            let name = rel.rsplit('/').next().unwrap_or(&rel);
            if !rel.ends_with(".rs") || name == "tests.rs" || name.ends_with("_tests.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("a source file");
            out.push((rel, without_tests(&without_comments(&text))));
        }
    }
    let mut out = Vec::new();
    let root = src();
    walk(&root, &root, &mut out);
    assert!(out.len() > 50, "the crate's sources, found: {}", out.len());
    out
}

/// `text` without its `//` comments (doc comments included: a link in a
/// doc is no import).
fn without_comments(text: &str) -> String {
    text.lines()
        .map(|line| match line.find("//") {
            Some(at) if !line[..at].contains('"') => &line[..at],
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `text` without the items marked `#[cfg(test)]`.
fn without_tests(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let item = &rest[at..];
        // The item ends at its first `;` before any `{`, or where its
        // first `{` closes.
        let (semi, open) = (item.find(';'), item.find('{'));
        let end = match (semi, open) {
            (Some(semi), Some(open)) if semi < open => semi + 1,
            (_, Some(open)) => {
                let mut depth = 0;
                let mut end = item.len();
                for (i, c) in item[open..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = open + i + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                end
            }
            (Some(semi), None) => semi + 1,
            (None, None) => item.len(),
        };
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

/// The crate's top module a file belongs to: `run/after.rs` → `run`,
/// `events.rs` → `events`.
fn module_of(file: &str) -> &str {
    match file.split_once('/') {
        Some((dir, _)) => dir,
        None => file.trim_end_matches(".rs"),
    }
}

/// The top modules `text` names through `crate::`: in `use crate::…`
/// (braced trees included) and in paths.
fn imported(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        // `$crate::` and `nika_retry_crate::` are not this crate's paths.
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        if let Some(tree) = rest.strip_prefix('{') {
            // `use crate::{a::…, b::{…}}`: the first name of each branch.
            for branch in split_top(tree) {
                let name: String = branch
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    found.insert(name);
                }
            }
            continue;
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() {
            found.insert(name);
        }
    }
    found
}

/// The top-level branches of a braced use tree, up to its closing brace.
fn split_top(tree: &str) -> Vec<&str> {
    let mut branches = Vec::new();
    let mut depth = 0;
    let mut from = 0;
    for (i, c) in tree.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                branches.push(&tree[from..i]);
                return branches;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                branches.push(&tree[from..i]);
                from = i + 1;
            }
            _ => {}
        }
    }
    branches.push(&tree[from..]);
    branches
}

fn floor_of(module: &str) -> Option<usize> {
    FLOORS.iter().position(|floor| floor.contains(&module))
}

#[test]
fn each_module_imports_from_its_floor_and_below_but_what_the_map_names() {
    let mut back_up = BTreeSet::new();
    let mut unplaced = BTreeSet::new();
    for (file, text) in sources() {
        if file == "lib.rs" {
            continue;
        }
        let module = module_of(&file);
        let Some(floor) = floor_of(module) else {
            unplaced.insert(module.to_owned());
            continue;
        };
        for target in imported(&text) {
            if target == module || target == "self" || target == "super" {
                continue;
            }
            match floor_of(&target) {
                Some(to) if to > floor => {
                    back_up.insert((file.clone(), target));
                }
                Some(_) => {}
                // A name of lib.rs itself (its re-exports, `__private`).
                None => {
                    unplaced.insert(format!("{file} -> crate::{target}"));
                }
            }
        }
    }
    assert!(
        unplaced.is_empty(),
        "modules on no floor of the map, or imports through lib.rs's names \
         (import from the defining module): {unplaced:?}"
    );
    let named: BTreeSet<(String, String)> = BACK_UP
        .iter()
        .map(|&(file, module)| (file.to_owned(), module.to_owned()))
        .collect();
    assert_eq!(
        back_up, named,
        "the imports that run back up (file, module) differ from those the \
         map in nika-retry/src/lib.rs names: mend the code or the map (and \
         BACK_UP here)"
    );
}

#[test]
fn no_module_imports_the_generated_codes_door() {
    for (file, text) in sources() {
        if file == "lib.rs" || module_of(&file) == "private" {
            continue;
        }
        assert!(
            !text.contains("__private") && !imported(&text).contains("private"),
            "{file} imports `__private`, which is for generated code only"
        );
    }
}

#[test]
fn every_thread_local_and_changing_static_is_in_ambient_but_those_the_map_names() {
    const CHANGING: [&str; 7] = [
        "Cell<",
        "RefCell<",
        "Mutex<",
        "RwLock<",
        "OnceLock<",
        "LazyLock<",
        "Atomic",
    ];
    let map = std::fs::read_to_string(src().join("lib.rs")).expect("lib.rs");
    let table = std::fs::read_to_string(src().join("ambient/mod.rs")).expect("ambient/mod.rs");
    for file in OUTSIDE_AMBIENT {
        assert!(
            map.contains(&format!("`{file}`")),
            "lib.rs's map does not name {file}, a thread-local or static outside ambient/"
        );
        assert!(
            table.contains(&format!("`{file}`")),
            "ambient/mod.rs's table does not list {file}"
        );
    }
    for (file, text) in sources() {
        if module_of(&file) == "ambient" || OUTSIDE_AMBIENT.contains(&file.as_str()) {
            continue;
        }
        assert!(
            !text.contains("thread_local!"),
            "{file} declares a thread-local: it belongs in ambient/, or beside its \
             type with the map's why (and OUTSIDE_AMBIENT here)"
        );
        for line in text.lines() {
            let line = line.trim_start();
            let line = line
                .strip_prefix("pub(crate) ")
                .or_else(|| line.strip_prefix("pub "))
                .unwrap_or(line);
            if let Some(decl) = line.strip_prefix("static ") {
                assert!(
                    !CHANGING.iter().any(|c| decl.contains(c)),
                    "{file} declares a static that changes: it belongs in ambient/, or \
                     beside its type with the map's why: {line}"
                );
            }
        }
    }
}

#[test]
fn the_reader_of_imports_reads_trees_paths_and_skips_tests() {
    let text = "use crate::{a::b, c::{d, e}};\nuse crate::f::G;\nlet x = crate::h::i();\n\
                #[cfg(test)]\nmod tests {\n    use crate::t::u;\n    fn f() { if x { } }\n}\n\
                macro_rules! m { () => { $crate::z::y } }\n";
    let found = imported(&without_tests(&without_comments(text)));
    assert_eq!(
        found,
        ["a", "c", "f", "h"].into_iter().map(String::from).collect()
    );
    let commented =
        without_comments("/// [`x`](crate::doc::link)\nuse crate::real::X; // crate::no\n");
    assert_eq!(
        imported(&commented),
        ["real"].into_iter().map(String::from).collect()
    );
}
