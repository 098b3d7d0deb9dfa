//! The properties the fuzz targets check, one module per target, so that
//! `cargo test` here can run them on the seeds and on generated inputs
//! without libFuzzer.

mod bytes;
pub mod duration_literal;
pub mod rate_limits;
pub mod retry_after;
pub mod task_policy_yaml;

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// Every seed of `target`, then the generated inputs.
    fn run(target: &str, check: fn(&[u8])) {
        let seeds = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("seeds")
            .join(target);
        for seed in std::fs::read_dir(seeds).unwrap() {
            check(&std::fs::read(seed.unwrap().path()).unwrap());
        }
        for input in inputs() {
            check(&input);
        }
    }

    /// 20 000 inputs of 0 to 79 bytes from a fixed xorshift stream.
    fn inputs() -> impl Iterator<Item = Vec<u8>> {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        (0..20_000).map(move |i| {
            (0..i % 80)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect()
        })
    }

    #[test]
    fn duration_literal() {
        run("duration_literal", crate::duration_literal::check);
    }

    #[test]
    fn rate_limits() {
        run("rate_limits", crate::rate_limits::check);
    }

    #[test]
    fn retry_after() {
        run("retry_after", crate::retry_after::check);
    }

    #[test]
    fn task_policy_yaml() {
        run("task_policy_yaml", crate::task_policy_yaml::check);
    }

    /// The generated documents reach both sides of the property: accepted
    /// ones (with a `retry:` block, whose values are then compared) and
    /// refused ones, each a good share of the stream.
    #[test]
    fn generated_task_policies_are_both_accepted_and_refused() {
        use crate::task_policy_yaml::{Generated, check_generated};
        let outcomes: Vec<Generated> = inputs()
            .map(|input| check_generated(&mut crate::bytes::Bytes(&input)))
            .collect();
        let count = |want: &Generated| outcomes.iter().filter(|o| *o == want).count();
        let with_retry = count(&Generated::Accepted { retry: true });
        let without = count(&Generated::Accepted { retry: false });
        let refused = count(&Generated::Refused);
        println!("{with_retry} accepted with retry:, {without} without, {refused} refused");
        assert!(with_retry >= 500, "{with_retry}");
        assert!(without >= 500, "{without}");
        assert!(refused >= 500, "{refused}");
    }
}
