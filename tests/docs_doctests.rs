//! Every page of `docs/` with a Rust snippet, and `README.md`, is compiled
//! as doctests: `src/lib.rs`'s `doctests` module includes each, so that a
//! page added or renamed cannot leave its snippets untested.

use std::path::Path;

#[test]
fn every_page_with_a_rust_snippet_is_a_doctest() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).expect("src/lib.rs");
    let mut pages = vec!["README.md".to_owned()];
    for entry in std::fs::read_dir(root.join("docs")).expect("docs/") {
        let name = entry
            .expect("a docs/ entry")
            .file_name()
            .into_string()
            .expect("a UTF-8 name");
        if name.ends_with(".md") {
            pages.push(format!("docs/{name}"));
        }
    }
    let mut missing = Vec::new();
    for page in pages {
        let text = std::fs::read_to_string(root.join(&page)).expect("a page");
        if has_rust(&text) && !lib.contains(&format!("include_str!(\"../{page}\")")) {
            missing.push(page);
        }
    }
    assert!(
        missing.is_empty(),
        "these pages have Rust snippets that no doctest compiles; add each to `src/lib.rs`'s \
         `doctests` module (`#[doc = include_str!(\"../<page>\")]`): {missing:?}"
    );
}

/// Whether `text` opens a code block that rustdoc compiles: ```` ```rust ````
/// (with or without more attributes) or a fence without a language.
fn has_rust(text: &str) -> bool {
    let mut inside = false;
    for line in text.lines() {
        let Some(info) = line.strip_prefix("```") else {
            continue;
        };
        if !inside && (info.is_empty() || info.starts_with("rust")) {
            return true;
        }
        inside = !inside;
    }
    false
}

#[test]
fn a_rust_fence_or_a_bare_one_is_rust_and_others_are_not() {
    assert!(has_rust("x\n```rust\nfn f() {}\n```\n"));
    assert!(has_rust("```\nfn f() {}\n```\n"));
    assert!(!has_rust("```text\nout\n```\n```yaml\nk: v\n```\n"));
}
