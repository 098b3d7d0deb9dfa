//! The instruments the crate records through (feature `opentelemetry`):
//! made once, from the meter provider given to
//! [`metrics::use_meter_provider`](crate::metrics::use_meter_provider), or
//! else from the global one when a call first records.

use std::sync::OnceLock;

use crate::metrics::instruments::Instruments;

/// The process's instruments, made once.
static INSTRUMENTS: OnceLock<Instruments> = OnceLock::new();

/// The instruments, made from the global meter provider if none was given.
#[inline]
pub(crate) fn instruments() -> &'static Instruments {
    INSTRUMENTS.get_or_init(Instruments::default_provider)
}

/// Makes the instruments with `make`, unless they are made already: then
/// `false`.
pub(crate) fn install(make: impl FnOnce() -> Instruments) -> bool {
    let mut installed = false;
    INSTRUMENTS.get_or_init(|| {
        installed = true;
        make()
    });
    installed
}
