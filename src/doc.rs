//! The YAML examples of a markdown document, each with what it expects: the
//! first line of a ```` ```yaml ```` block is `# valid` or `# error: <message>`,
//! and a refused example the JSON Schema cannot catch also says
//! `# schema: passes (why)`.

/// What a YAML example expects of the parser.
#[derive(Clone, Debug, PartialEq)]
pub enum Expect {
    /// Accepted.
    Valid,
    /// Refused with an error that contains this message.
    Error(String),
}

/// One ```` ```yaml ```` block.
#[derive(Clone, Debug)]
pub struct YamlExample {
    /// The line of the opening fence (1-based), for failure messages.
    pub line: usize,
    /// The block's text, marker lines included (they are YAML comments).
    pub yaml: String,
    /// What the parser does with it.
    pub expect: Expect,
    /// A refused example that the JSON Schema accepts (a rule across keys).
    pub schema_passes: bool,
}

/// Every ```` ```yaml ```` block of `markdown`.
///
/// # Panics
/// On a block whose first line is neither marker, or an unclosed block: the
/// document is then wrong, and the test says where.
pub fn yaml_examples(markdown: &str) -> Vec<YamlExample> {
    let mut examples = Vec::new();
    let mut lines = markdown.lines().enumerate();
    while let Some((i, line)) = lines.next() {
        if line.trim_end() != "```yaml" {
            continue;
        }
        let body: Vec<&str> = lines
            .by_ref()
            .map(|(_, l)| l)
            .take_while(|l| l.trim_end() != "```")
            .collect();
        let first = body.first().copied().unwrap_or_default();
        let expect = match first.strip_prefix("# error: ") {
            Some(message) => Expect::Error(message.trim().to_owned()),
            None if first.trim_end() == "# valid" => Expect::Valid,
            None => panic!(
                "line {}: a ```yaml block starts with `# valid` or `# error: <message>`, not {first:?}",
                i + 1
            ),
        };
        examples.push(YamlExample {
            line: i + 1,
            yaml: body.join("\n") + "\n",
            expect,
            schema_passes: body.iter().any(|l| l.starts_with("# schema: passes")),
        });
    }
    examples
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_markers_and_bodies() {
        let md = "text\n```yaml\n# valid\na: 1\n```\n```yaml\n# error: bad `x`\n# schema: passes (two keys)\nb: 2\n```\n```rust\nlet x = 1;\n```\n";
        let examples = yaml_examples(md);
        assert_eq!(examples.len(), 2);
        assert_eq!((examples[0].line, &examples[0].expect), (2, &Expect::Valid));
        assert_eq!(examples[0].yaml, "# valid\na: 1\n");
        assert_eq!(examples[1].expect, Expect::Error("bad `x`".into()));
        assert!(examples[1].schema_passes && !examples[0].schema_passes);
    }

    #[test]
    #[should_panic(expected = "line 1")]
    fn a_block_without_a_marker_is_refused() {
        yaml_examples("```yaml\na: 1\n```\n");
    }
}
