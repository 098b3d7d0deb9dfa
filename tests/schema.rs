//! `schema/task-policy.schema.json` is the schema the Rust types generate
//! (`NIKA_BLESS=1 cargo test --test schema` rewrites it), and it agrees with
//! the reference: its valid examples pass, its refused ones fail.

use nika_retry_tests::doc::{Expect, yaml_examples};

const CHECKED_IN: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/schema/task-policy.schema.json"
);

fn generated() -> serde_json::Value {
    serde_json::to_value(nika_retry::schema::task_policy()).expect("a schema is JSON")
}

#[test]
fn the_checked_in_schema_is_the_generated_one() {
    let pretty = serde_json::to_string_pretty(&generated()).unwrap() + "\n";
    if std::env::var_os("NIKA_BLESS").is_some() {
        std::fs::create_dir_all(std::path::Path::new(CHECKED_IN).parent().unwrap()).unwrap();
        std::fs::write(CHECKED_IN, &pretty).unwrap();
    }
    let on_disk = std::fs::read_to_string(CHECKED_IN)
        .unwrap_or_else(|_| panic!("missing {CHECKED_IN}; run with NIKA_BLESS=1"));
    assert!(
        on_disk == pretty,
        "schema/task-policy.schema.json is out of date: review the change and run \
         NIKA_BLESS=1 cargo test --test schema\n--- generated\n{pretty}"
    );
}

#[test]
fn the_references_examples_pass_or_fail_the_schema_as_they_pass_or_fail_the_parser() {
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(CHECKED_IN).expect("the schema")).unwrap();
    let validator = jsonschema::draft7::new(&schema).expect("a valid draft-07 schema");
    let reference = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/workflow-yaml.md");
    let examples = yaml_examples(&std::fs::read_to_string(reference).unwrap());
    assert!(examples.len() >= 30, "{}", examples.len());
    let mut wrong = Vec::new();
    for example in &examples {
        // YAML to JSON, as a language server sees it; a list holds tasks.
        let value: serde_json::Value = serde_norway::from_str(&example.yaml).unwrap();
        let tasks = match value {
            serde_json::Value::Array(tasks) => tasks,
            task => vec![task],
        };
        let passes = tasks.iter().all(|t| validator.is_valid(t));
        let should_pass = example.expect == Expect::Valid || example.schema_passes;
        if passes != should_pass {
            let errors: Vec<String> = tasks
                .iter()
                .flat_map(|t| {
                    validator
                        .iter_errors(t)
                        .map(|e| e.to_string())
                        .collect::<Vec<_>>()
                })
                .collect();
            wrong.push(format!(
                "docs/workflow-yaml.md:{}: the schema {} it ({:?}) {errors:?}",
                example.line,
                if passes { "accepts" } else { "refuses" },
                example.expect
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The schema's ranges and names are the parser's: spot checks of each key.
#[test]
fn the_schema_states_each_keys_range() {
    let schema = generated();
    let retry = schema
        .pointer("/definitions/RetryConfig/properties")
        .expect("retry keys");
    assert_eq!(retry["max_attempts"]["minimum"], 1);
    assert_eq!(retry["max_attempts"]["maximum"], 10);
    assert_eq!(retry["jitter"]["maximum"], 1.0);
    assert_eq!(
        schema.pointer("/definitions/RetryConfig/additionalProperties"),
        Some(&serde_json::Value::Bool(false)),
        "the retry: block refuses unknown keys"
    );
    assert_eq!(
        schema.pointer("/properties/budget/minimum"),
        Some(&1.into())
    );
    assert_eq!(
        schema.pointer("/properties/budget/default"),
        Some(&9.into())
    );
    assert!(
        schema.pointer("/additionalProperties").is_none(),
        "a task's other keys are free"
    );
}
