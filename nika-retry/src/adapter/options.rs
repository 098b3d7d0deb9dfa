//! The options of an adapter: what `#[retry]` and `#[timeout]` say on a fn,
//! said once for every request of a layer or a middleware.

use core::time::Duration;

use crate::run::{AttemptLimits, Overrides, Site};
use crate::upstream::Upstream;
use crate::vocab::config::RetryConfig;
use crate::vocab::layer::Layer;

/// The time limits of each request sent through an adapter, meaning what
/// they mean in `#[timeout]`: `attempt` bounds each attempt, `read` cuts
/// one that has gone that long without progress (inactivity), `total`
/// bounds the attempts and the waits between them. An expired limit is a
/// [`TimeoutError`](crate::TimeoutError), converted into the service's
/// error.
///
/// One type for both adapters: `nika_retry::tower::Timeouts` and
/// `nika_retry::reqwest_middleware::Timeouts` are this one. `attempt`
/// bounds an attempt up to its response's headers (and its body, where the
/// adapter reads it inside the attempt); `read` and `total` reach the body
/// read after the adapter returned where it is held
/// ([`ReadBody`](crate::tower::ReadBody)).
///
/// `#[non_exhaustive]`: built from [`Timeouts::NONE`] with its setters.
///
/// ```
/// # #[cfg(feature = "tower")]
/// # fn main() {
/// use std::time::Duration;
/// use nika_retry::tower::Timeouts;
///
/// let timeouts = Timeouts::NONE
///     .with_attempt(Duration::from_secs(10))
///     .with_read(Duration::from_secs(2))
///     .with_total(Duration::from_secs(30));
/// assert_eq!(timeouts.read, Some(Duration::from_secs(2)));
/// # }
/// # #[cfg(not(feature = "tower"))]
/// # fn main() {}
/// ```
#[non_exhaustive]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Timeouts {
    /// Bounds each attempt's whole duration.
    pub attempt: Option<Duration>,
    /// Cuts an attempt that has gone this long without progress.
    pub read: Option<Duration>,
    /// Bounds the request in all, its attempts and waits included.
    pub total: Option<Duration>,
}

impl Timeouts {
    /// No limit.
    pub const NONE: Timeouts = Timeouts {
        attempt: None,
        read: None,
        total: None,
    };

    /// The same limits, each attempt bounded by `attempt`.
    #[must_use]
    pub const fn with_attempt(mut self, attempt: Duration) -> Timeouts {
        self.attempt = Some(attempt);
        self
    }

    /// The same limits, an attempt cut after `read` without progress.
    #[must_use]
    pub const fn with_read(mut self, read: Duration) -> Timeouts {
        self.read = Some(read);
        self
    }

    /// The same limits, the request bounded in all by `total`.
    #[must_use]
    pub const fn with_total(mut self, total: Duration) -> Timeouts {
        self.total = Some(total);
        self
    }

    /// Each attempt's limits, as `#[timeout]` gives them to its attempts:
    /// the one place an adapter's limits become `AttemptLimits` (`total`
    /// goes to the call instead).
    pub(crate) const fn attempt_limits(self) -> AttemptLimits {
        AttemptLimits {
            connect: None,
            read: self.read,
            attempt: self.attempt,
        }
    }
}

/// The four sites of an adapter, one per layer: what its calls are named
/// by in events and layer reports (the adapter's path), with each layer's
/// defaults. `static`, as a fn's site is, since a call keeps a
/// `&'static Site`.
#[derive(Debug)]
pub(crate) struct Sites([Site; 4]);

impl Sites {
    /// The sites of the adapter named `operation`.
    pub(crate) const fn new(operation: &'static str) -> Sites {
        Sites([
            Overrides::NONE.site(Layer::Http, operation),
            Overrides::NONE.site(Layer::Provider, operation),
            Overrides::NONE.site(Layer::Tool, operation),
            Overrides::NONE.site(Layer::Task, operation),
        ])
    }

    /// The site of `layer`.
    pub(crate) const fn of(&'static self, layer: Layer) -> &'static Site {
        match layer {
            Layer::Http => &self.0[0],
            Layer::Provider => &self.0[1],
            Layer::Tool => &self.0[2],
            Layer::Task => &self.0[3],
        }
    }
}

/// What an adapter says about each request it sends: `#[retry]`'s and
/// `#[timeout]`'s keys, once for all of them. Built with the layer's
/// defaults ([`Options::new`]), then the builder methods the adapters
/// forward to, each taking and returning it.
#[derive(Clone, Debug)]
pub(crate) struct Options {
    /// The layer, and the adapter's name for the events.
    pub(crate) site: &'static Site,
    /// `config = …`: replaces the layer's defaults (and, like it, lets a
    /// `tool` or `task` layer retry without its task opting in).
    pub(crate) config: Option<RetryConfig>,
    pub(crate) timeouts: Timeouts,
    /// `upstream = …`: the holds and the pacing its requests share.
    pub(crate) upstream: Option<Upstream>,
    /// `cost = …`: what one attempt spends of the upstream's token limit.
    pub(crate) cost: Option<u32>,
    /// `idempotent = …`: `None` follows the calls around (an adapter for
    /// `http::Request` says the method's before it drives).
    pub(crate) idempotent: Option<bool>,
}

impl Options {
    /// The defaults of `layer`, for the adapter whose sites are `sites`.
    pub(crate) const fn new(sites: &'static Sites, layer: Layer) -> Options {
        Options {
            site: sites.of(layer),
            config: None,
            timeouts: Timeouts::NONE,
            upstream: None,
            cost: None,
            idempotent: None,
        }
    }

    /// The layer (for the attempts' spans, and the middleware's `layer()`).
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    pub(crate) const fn layer(&self) -> Layer {
        self.site.layer
    }

    /// `config`, over the layer's defaults.
    pub(crate) fn config(mut self, config: RetryConfig) -> Options {
        self.config = Some(config);
        self
    }

    /// The time limits of each request.
    pub(crate) fn timeouts(mut self, timeouts: Timeouts) -> Options {
        self.timeouts = timeouts;
        self
    }

    /// The upstream the requests share.
    pub(crate) fn upstream(mut self, upstream: Upstream) -> Options {
        self.upstream = Some(upstream);
        self
    }

    /// What one attempt spends of the upstream's token limit (saturated
    /// below the crate's "unknown" mark, as `cost = …` is).
    pub(crate) fn cost(mut self, cost: u32) -> Options {
        self.cost = Some(crate::run::IntoCost::into_cost(cost));
        self
    }

    /// Whether a request may be sent again whatever it reached.
    pub(crate) fn idempotent(mut self, idempotent: bool) -> Options {
        self.idempotent = Some(idempotent);
        self
    }
}
