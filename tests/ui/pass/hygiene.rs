//! No generated item or local is reachable from the body: the user's names
//! that look like the generated ones keep their meaning.
use nika_retry::{retry, timeout, Classify, TimeoutError};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("flaky")]
    #[category(transient)]
    Flaky,
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
}

const __NIKA_SITE: u32 = 7;

#[retry(layer = "provider")]
#[timeout(attempt = "1s")]
async fn consts() -> Result<u32, Error> {
    // The module's const, not the generated site.
    let site: u32 = __NIKA_SITE;
    Ok(site)
}

#[retry(layer = "provider")]
async fn locals(ok: bool) -> Result<u32, Error> {
    // Plain bindings, not constant patterns, and the user's own values.
    let __nika_call = 1u32;
    let __nika_result = 2u32;
    let __nika_delay = 3u32;
    let __nika_ret = 4u32;
    let __nika_self = 5u32;
    if !ok {
        return Err(Error::Flaky);
    }
    Ok(__nika_call + __nika_result + __nika_delay + __nika_ret + __nika_self)
}

mod inner {
    use super::Error;
    use nika_retry::retry;

    #[retry(layer = "provider")]
    pub async fn shadowed() -> Result<(), Error> {
        // A binding that would be a constant pattern if the site were in scope.
        let __NIKA_SITE = 1u8;
        let _ = __NIKA_SITE;
        Ok(())
    }
}

fn main() {
    let _ = (consts(), locals(true), inner::shadowed());
}
