//! `BENCH_RUN=group/name:n`, the one-contender mode of the benches that
//! `benches/instructions.sh` runs under cachegrind.

/// The contender and the count of `BENCH_RUN`, if it is set.
pub fn requested() -> Option<(String, u32)> {
    let spec = std::env::var("BENCH_RUN").ok()?;
    let (contender, n) = spec
        .split_once(':')
        .unwrap_or_else(|| panic!("BENCH_RUN={spec}: want group/name:n"));
    let n = n
        .parse()
        .unwrap_or_else(|e| panic!("BENCH_RUN={spec}: n: {e}"));
    Some((contender.to_owned(), n))
}
