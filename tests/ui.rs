//! Compile-time checks of `#[retry]`, `#[timeout]` and `#[derive(Classify)]`:
//! every misuse in DESIGN.md "Compile-time checks" has a case in
//! `tests/ui/fail` with its expected `.stderr`; `tests/ui/pass` pins what
//! must keep compiling. Regenerate with `TRYBUILD=overwrite cargo test --test ui`.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/fail/*.rs");
    t.pass("tests/ui/pass/*.rs");
}
