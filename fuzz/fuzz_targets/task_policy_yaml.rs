//! See `nika_retry_fuzz::task_policy_yaml` (`fuzz/src/task_policy_yaml.rs`) for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| nika_retry_fuzz::task_policy_yaml::check(data));
