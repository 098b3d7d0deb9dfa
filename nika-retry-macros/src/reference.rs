//! The reference lists every key: `docs/attributes.md`'s tables and the
//! rustdoc of `nika_retry::retry` and `nika_retry::timeout` each have one
//! row per key of [`RETRY_KEYS`] and [`TIMEOUT_KEYS`], and no other, so
//! that a key cannot land undocumented (nor a removed one stay documented).
//!
//! A table starts at a line `| \`#[retry]\` key | …` (or `#[timeout]`); its
//! rows are the `|` lines after it, each naming its key in the first cell.

use std::path::{Path, PathBuf};

use crate::vocab::{CATEGORY_KEYS, Key, RETRY_KEYS, TIMEOUT_KEYS};

/// The workspace root (this crate's parent directory).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the macro crate sits in the workspace")
        .to_path_buf()
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The doc comment of the item declared by the line `item` in `source`:
/// the `///` lines right above it, without their `/// ` prefix.
fn doc_above(source: &str, item: &str) -> String {
    let lines: Vec<&str> = source.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.trim() == item)
        .unwrap_or_else(|| panic!("`{item}` not found"));
    let mut doc: Vec<&str> = lines[..at]
        .iter()
        .rev()
        .map(|l| l.trim_start())
        .take_while(|l| l.starts_with("///") || l.starts_with("#["))
        .filter_map(|l| l.strip_prefix("///"))
        .map(|l| l.strip_prefix(' ').unwrap_or(l))
        .collect();
    doc.reverse();
    doc.join("\n")
}

/// The keys the table of `#[attr]` in `text` has a row for, in order;
/// `None` if `text` has no such table.
fn table_keys(text: &str, attr: &str) -> Option<Vec<String>> {
    let header = format!("| `#[{attr}]` key |");
    let mut lines = text.lines().skip_while(|l| !l.starts_with(&header));
    lines.next()?;
    let rows = lines
        .take_while(|l| l.starts_with('|'))
        .filter(|l| !l.starts_with("|---"))
        .map(|row| {
            let cell = row.split('|').nth(1).unwrap_or_default().trim();
            cell.trim_matches('`').to_owned()
        })
        .collect();
    Some(rows)
}

/// What is wrong with the table of `#[attr]` in `text` (named `place`)
/// against `keys`: one line per key without a row, per row that is no key.
fn mismatches(text: &str, place: &str, attr: &str, keys: &[Key]) -> Vec<String> {
    let Some(rows) = table_keys(text, attr) else {
        return vec![format!(
            "{place}: no table of #[{attr}] keys (a line starting `| `#[{attr}]` key |`)"
        )];
    };
    let mut wrong = Vec::new();
    for key in keys {
        if !rows.iter().any(|row| row == key.name) {
            wrong.push(format!(
                "{place}: #[{attr}] key `{}` has no line; add a row \
                 `| `{}` | <what it takes> | <what it does, one line> |` \
                 to its table of #[{attr}] keys",
                key.name, key.name
            ));
        }
    }
    for row in &rows {
        if !keys.iter().any(|key| key.name == row) {
            wrong.push(format!(
                "{place}: the table of #[{attr}] keys has a row `{row}`, \
                 which is not a key of #[{attr}] (nika-retry-macros/src/vocab.rs)"
            ));
        }
    }
    wrong
}

#[test]
fn the_reference_and_the_rustdoc_list_every_key_of_both_attributes() {
    let reference = read("docs/attributes.md");
    let lib = read("nika-retry/src/lib.rs");
    let places = [
        ("docs/attributes.md", reference.clone(), "retry"),
        ("docs/attributes.md", reference, "timeout"),
        (
            "the rustdoc of `nika_retry::retry` (nika-retry/src/lib.rs)",
            doc_above(&lib, "pub use nika_retry_macros::retry;"),
            "retry",
        ),
        (
            "the rustdoc of `nika_retry::timeout` (nika-retry/src/lib.rs)",
            doc_above(&lib, "pub use nika_retry_macros::timeout;"),
            "timeout",
        ),
    ];
    let mut wrong = Vec::new();
    for (place, text, attr) in &places {
        let keys: &[Key] = if *attr == "retry" {
            &RETRY_KEYS
        } else {
            &TIMEOUT_KEYS
        };
        wrong.extend(mismatches(text, place, attr, keys));
    }
    assert!(wrong.is_empty(), "\n{}\n", wrong.join("\n"));
}

#[test]
fn the_rustdoc_of_the_derive_lists_every_category_key() {
    let lib = read("nika-retry/src/lib.rs");
    let doc = doc_above(&lib, "pub use nika_retry_macros::Classify;");
    let keys: Vec<Key> = CATEGORY_KEYS
        .iter()
        .map(|&name| Key { name, example: "" })
        .collect();
    let place = "the rustdoc of `nika_retry::Classify` (nika-retry/src/lib.rs)";
    let wrong = mismatches(&doc, place, "category", &keys);
    assert!(wrong.is_empty(), "\n{}\n", wrong.join("\n"));
}

#[test]
fn a_key_without_a_row_is_named_with_where_it_lacks_one() {
    let text = "intro\n\n| `#[retry]` key | takes | what it does |\n|---|---|---|\n\
                | `layer` | a string | the layer |\n| `colour` | a string | none |\n\nafter\n| `attempts` | x | y |";
    let keys = [
        Key {
            name: "layer",
            example: "layer = \"http\"",
        },
        Key {
            name: "attempts",
            example: "attempts = 3",
        },
    ];
    let wrong = mismatches(text, "README.md", "retry", &keys);
    assert_eq!(wrong.len(), 2, "{wrong:?}");
    assert!(
        wrong[0].starts_with("README.md: #[retry] key `attempts` has no line"),
        "{}",
        wrong[0]
    );
    assert!(wrong[1].contains("a row `colour`"), "{}", wrong[1]);
    let none = mismatches("no table", "lib.rs", "timeout", &keys);
    assert!(none[0].contains("no table of #[timeout] keys"), "{none:?}");
}

#[test]
fn the_doc_above_an_item_is_its_comment_lines() {
    let source =
        "//! crate\n\n/// One.\n///\n/// | `#[retry]` key |\n#[doc(inline)]\npub use m::retry;\n";
    assert_eq!(
        doc_above(source, "pub use m::retry;"),
        "One.\n\n| `#[retry]` key |"
    );
}
