//! Generic fns with where-clauses, lifetimes, `?` and `return` in the body.
use std::fmt::Display;

use nika_retry::{retry, timeout, Classify, TimeoutError};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("bad number")]
    #[category(permanent)]
    Parse(#[from] std::num::ParseIntError),
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
}

#[retry(layer = "provider")]
#[timeout(attempt = "1s")]
async fn parse_all<'a, T, I>(items: &'a [T], extra: I) -> Result<Vec<u32>, Error>
where
    T: AsRef<str> + Sync,
    I: IntoIterator<Item = u32> + Clone + Send,
{
    let mut out = Vec::new();
    for item in items {
        if item.as_ref().is_empty() {
            return Ok(out);
        }
        out.push(item.as_ref().parse::<u32>()?);
    }
    out.extend(extra.clone());
    Ok(out)
}

struct Wrapper<T>(T);

impl<T: Display + Sync> Wrapper<T> {
    #[retry(layer = "task")]
    async fn show<U>(&self, suffix: U) -> Result<String, Error>
    where
        U: Display + Sync,
    {
        Ok(format!("{}{}", self.0, suffix))
    }
}

fn main() {
    let _ = parse_all(&["1", "2"], vec![3]);
    let _ = Wrapper(1).show("!");
}
