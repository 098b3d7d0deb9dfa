//! The properties the fuzz targets check, one module per target, so that
//! `cargo test` here can run them on the seeds and on generated inputs
//! without libFuzzer.

pub mod duration_literal;
pub mod retry_after;
pub mod task_policy_yaml;

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// Every seed of `target`, then 20 000 inputs from a fixed xorshift stream.
    fn run(target: &str, check: fn(&[u8])) {
        let seeds = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("seeds")
            .join(target);
        for seed in std::fs::read_dir(seeds).unwrap() {
            check(&std::fs::read(seed.unwrap().path()).unwrap());
        }
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for len in (0..20_000).map(|i| i % 80) {
            let input: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            check(&input);
        }
    }

    #[test]
    fn duration_literal() {
        run("duration_literal", crate::duration_literal::check);
    }

    #[test]
    fn retry_after() {
        run("retry_after", crate::retry_after::check);
    }

    #[test]
    fn task_policy_yaml() {
        run("task_policy_yaml", crate::task_policy_yaml::check);
    }
}
