//! Every YAML example of `docs/workflow-yaml.md`, parsed as a task mapping
//! (or a list of them): `# valid` ones are accepted, `# error: …` ones are
//! refused with the documented message.

use nika_retry::task::TaskPolicy;
use nika_retry_tests::doc::{Expect, YamlExample, yaml_examples};

fn reference() -> Vec<YamlExample> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/workflow-yaml.md");
    let text = std::fs::read_to_string(path).expect("docs/workflow-yaml.md");
    yaml_examples(&text)
}

/// Parses a task mapping, or each task of a list.
fn parse(yaml: &str) -> Result<Vec<TaskPolicy>, String> {
    let value: serde_norway::Value = serde_norway::from_str(yaml).map_err(|e| e.to_string())?;
    if value.is_sequence() {
        serde_norway::from_str(yaml).map_err(|e| e.to_string())
    } else {
        serde_norway::from_str(yaml)
            .map(|p| vec![p])
            .map_err(|e| e.to_string())
    }
}

#[test]
fn every_example_of_the_reference_does_what_it_says() {
    let examples = reference();
    let refused = examples
        .iter()
        .filter(|e| matches!(e.expect, Expect::Error(_)))
        .count();
    assert!(
        refused >= 20 && examples.len() - refused >= 10,
        "{refused} refused of {}",
        examples.len()
    );
    let mut wrong = Vec::new();
    for example in &examples {
        match (&example.expect, parse(&example.yaml)) {
            (Expect::Valid, Ok(_)) => {}
            (Expect::Error(want), Err(got)) if got.contains(want.as_str()) => {}
            (expect, got) => wrong.push(format!(
                "docs/workflow-yaml.md:{}: expected {expect:?}, got {got:?}",
                example.line
            )),
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The reference's jitter example: the delays it promises, on a paused clock.
#[test]
fn the_constant_200ms_example_waits_100_to_200ms() {
    let example = reference()
        .into_iter()
        .find(|e| e.yaml.contains("delay_ms: 200, backoff: constant }"))
        .expect("the jitter example");
    let policy = parse(&example.yaml).unwrap().remove(0);
    let retry = policy.retry.expect("a retry: block");
    let mut state = nika_retry::engine::RetryState::with_seed(7);
    let failure = nika_retry::engine::Failure::new(nika_retry::ErrorCategory::Transient, None);
    for _ in 1..retry.max_attempts {
        match state.decide(&retry, failure, nika_retry::engine::Limits::NONE) {
            nika_retry::engine::Decision::Retry { delay, .. } => {
                assert!((100..=200).contains(&delay.as_millis()), "{delay:?}")
            }
            other => panic!("{other:?}"),
        }
    }
}
