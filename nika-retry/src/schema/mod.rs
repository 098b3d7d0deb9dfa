//! The JSON Schema of a workflow task's `retry:`, `timeout:` and `budget:`
//! keys (feature `schema`), generated from the types that read them.
//!
//! An editor with a YAML language server validates a workflow file against
//! it; the repository keeps a copy at `schema/task-policy.schema.json`.
//!
//! ```
//! let schema = nika_retry::schema::task_policy();
//! let keys = schema.get("properties").and_then(|p| p.as_object()).unwrap();
//! assert!(keys.contains_key("retry") && keys.contains_key("timeout") && keys.contains_key("budget"));
//! ```

use crate::vocab::policy::TaskPolicy;
use schemars::Schema;
use schemars::generate::SchemaSettings;

/// Where the schema is published: its `$id`.
pub const ID: &str =
    "https://raw.githubusercontent.com/nika-engine/nika-retry/main/schema/task-policy.schema.json";

/// The JSON Schema (draft 07, the draft YAML language servers know best) of
/// a task's mapping: its `retry:`, `timeout:` and `budget:` keys, its other
/// keys left free.
///
/// One rule is not in it, since a JSON Schema cannot compare two keys:
/// `delay_ms` must not exceed `max_delay_ms`.
pub fn task_policy() -> Schema {
    let mut schema = SchemaSettings::draft07()
        .into_generator()
        .into_root_schema_for::<TaskPolicy>();
    schema.insert("$id".into(), ID.into());
    schema.insert(
        "title".into(),
        "A workflow task's retry:, timeout: and budget:".into(),
    );
    schema
}
