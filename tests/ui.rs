//! Compile-time checks of `#[retry]`, `#[timeout]` and `#[derive(Classify)]`:
//! every misuse the macros refuse (the layer rules of docs/layers.md and
//! docs/attributes.md, and the crate docs of `nika-retry`) has a case in
//! `tests/ui/fail` with its expected `.stderr`, one idea per file;
//! `tests/ui/pass` pins what must keep compiling. Regenerate with
//! `TRYBUILD=overwrite cargo test --test ui`.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/fail/*.rs");
    t.pass("tests/ui/pass/*.rs");
}
