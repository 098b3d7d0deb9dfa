//! The `tracing` warning of a layer violation (docs/layers.md):
//! once per pair of fns in a process, however often the pair nests, naming
//! both fns and layers. Alone in its binary: the pairs already warned about
//! are process-wide, and tracing caches callsite interest process-wide.

use nika_retry::{Classify, retry};
use nika_retry_tests::logs::{Clock, logged};

#[derive(Debug, Classify)]
#[category(transient)]
struct Busy;

#[retry(layer = "http")]
async fn post() -> Result<u32, Busy> {
    Ok(1)
}

#[retry(layer = "provider")]
async fn complete() -> Result<u32, Busy> {
    Ok(1)
}

/// An http fn whose attempt calls a provider fn: upside down.
#[retry(layer = "http")]
async fn send() -> Result<u32, Busy> {
    complete().await
}

/// A provider fn whose attempt calls a provider fn: a fallback chain that multiplies.
#[retry(layer = "provider")]
async fn fallback() -> Result<u32, Busy> {
    complete().await
}

/// The normal shape: http under provider.
#[retry(layer = "provider")]
async fn ask() -> Result<u32, Busy> {
    post().await
}

#[test]
fn the_warning_is_said_once_per_pair_of_fns() {
    // `fmt`'s own default level.
    let ((), text) = logged(tracing::Level::INFO, Clock::Real, async {
        for _ in 0..3 {
            assert_eq!(send().await.unwrap(), 1);
            assert_eq!(fallback().await.unwrap(), 1);
            assert_eq!(ask().await.unwrap(), 1);
        }
    });
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    for line in &lines {
        assert!(line.contains(" WARN "), "{line}");
        assert!(line.contains("layer violation (ADR-006)"), "{line}");
    }
    assert!(
        lines[0].contains(
            "provider loop stratification_log::complete inside an attempt of http loop \
             stratification_log::send: the layers are upside down"
        ),
        "{}",
        lines[0]
    );
    assert!(
        lines[0].contains("outer_layer=\"http\"") && lines[0].contains("inner_layer=\"provider\""),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].contains(
            "provider loop stratification_log::complete inside an attempt of provider loop \
             stratification_log::fallback: two loops of one layer nested multiply their attempts"
        ),
        "{}",
        lines[1]
    );
}
