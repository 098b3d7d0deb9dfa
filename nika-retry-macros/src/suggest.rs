//! "Did you mean …?" for misspelt keys, layers and categories.

/// The candidate closest to `input`, if it is close enough to be a typo.
pub(crate) fn nearest<'a>(input: &str, candidates: &[&'a str]) -> Option<&'a str> {
    candidates
        .iter()
        .map(|c| (strsim::jaro_winkler(input, c), *c))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

/// `"; did you mean `x`?"`, or nothing.
pub(crate) fn did_you_mean(input: &str, candidates: &[&str]) -> String {
    nearest(input, candidates)
        .map(|c| format!("; did you mean `{c}`?"))
        .unwrap_or_default()
}

/// "unknown {what} `{input}` ({label}: a, b, c); did you mean `b`?"
pub(crate) fn unknown(what: &str, input: &str, label: &str, candidates: &[&str]) -> String {
    format!(
        "unknown {what} `{input}` ({label}: {}){}",
        candidates.join(", "),
        did_you_mean(input, candidates)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_names_only() {
        let layers = ["http", "provider", "tool", "task"];
        assert_eq!(nearest("providr", &layers), Some("provider"));
        assert_eq!(nearest("htp", &layers), Some("http"));
        assert_eq!(nearest("database", &layers), None);
        assert_eq!(did_you_mean("tsk", &layers), "; did you mean `task`?");
        assert_eq!(
            unknown("layer", "providr", "layers", &layers),
            "unknown layer `providr` (layers: http, provider, tool, task); did you mean `provider`?"
        );
    }
}
