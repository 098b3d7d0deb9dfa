//! What a [`RetryService`](super::RetryService) needs of its inner service
//! (besides its error's [`Classify`](crate::Classify), which has its own
//! message), each a trait of its own with a blanket impl so that rustc's
//! first line, where the bound fails, says what to write (its
//! `#[diagnostic::on_unimplemented]`) rather than a bare "`From<TimeoutError>`
//! is not implemented" or "`BoxService<…>: Clone` is not satisfied". The
//! impls are `#[diagnostic::do_not_recommend]`: rustc then reports the
//! trait itself, not the bound inside its impl (the `tower_` UI cases of
//! `tests/ui/fail/` pin the messages).
//!
//! [`FromTimeoutError`] and [`FromHeld`] convert as the traits `#[timeout]`
//! and `upstream = …` put on a fn's error do (and `stream::StreamError`):
//! the same blanket impl, kept a trait of its own because the trait is the
//! message, one per trait, and this one names the inner service and the
//! `map_err` below the layer.

use crate::upstream::Held;
use crate::vocab::timeout_error::TimeoutError;

/// The inner service's error holds the layer's time limits: every type
/// that is `From<TimeoutError>` (a variant with `#[from]`, as in
/// [`RetryLayer`](super::RetryLayer)'s example). Implemented for each such
/// type; not to be implemented by hand.
///
/// ```
/// use nika_retry::TimeoutError;
/// use nika_retry::tower::FromTimeoutError;
///
/// #[derive(Debug, thiserror::Error)]
/// enum Fault {
///     #[error(transparent)]
///     Timeout(#[from] TimeoutError),
/// }
///
/// fn holds<E: FromTimeoutError>() {}
/// holds::<Fault>();
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}`, the inner service's error, cannot hold the layer's time limits: `RetryLayer` needs `{Self}: From<nika_retry::TimeoutError>`",
    label = "the inner service's error needs `From<nika_retry::TimeoutError>`",
    note = "add a variant such as `#[error(transparent)] #[category(transparent)] Timeout(#[from] nika_retry::TimeoutError)` to your error type",
    note = "for an error from another crate (hyper-util's, tonic's), which cannot take a new `From` impl, wrap it in your own below the layer: `ServiceBuilder::new().layer(RetryLayer::new(…)).map_err(YourError::from).service(client)`"
)]
pub trait FromTimeoutError {
    /// The expired limit, as the error.
    fn from_timeout(timeout: TimeoutError) -> Self;
}

#[diagnostic::do_not_recommend]
impl<E: From<TimeoutError>> FromTimeoutError for E {
    fn from_timeout(timeout: TimeoutError) -> Self {
        E::from(timeout)
    }
}

/// The inner service's error holds an upstream's hold longer than the layer
/// waits: every type that is `From<Held>`. Implemented for each such type;
/// not to be implemented by hand.
///
/// ```
/// use nika_retry::tower::FromHeld;
/// use nika_retry::upstream::Held;
///
/// #[derive(Debug, thiserror::Error)]
/// enum Fault {
///     #[error(transparent)]
///     Held(#[from] Held),
/// }
///
/// fn holds<E: FromHeld>() {}
/// holds::<Fault>();
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}`, the inner service's error, cannot say that the upstream is held: `RetryLayer` needs `{Self}: From<nika_retry::upstream::Held>`",
    label = "the inner service's error needs `From<nika_retry::upstream::Held>`",
    note = "add a variant such as `#[error(transparent)] #[category(transparent)] Held(#[from] nika_retry::upstream::Held)` to your error type: a request that will not wait out a hold fails with it",
    note = "for an error from another crate (hyper-util's, tonic's), which cannot take a new `From` impl, wrap it in your own below the layer: `ServiceBuilder::new().layer(RetryLayer::new(…)).map_err(YourError::from).service(client)`"
)]
pub trait FromHeld {
    /// The hold, as the error.
    fn from_held(held: Held) -> Self;
}

#[diagnostic::do_not_recommend]
impl<E: From<Held>> FromHeld for E {
    fn from_held(held: Held) -> Self {
        E::from(held)
    }
}

/// The inner service can be cloned: each attempt after the first is sent
/// through a clone of it, made ready (tower's way: the service made ready
/// goes with the request). Every `Clone` type; not to be implemented by
/// hand.
///
/// ```
/// use nika_retry::tower::CloneService;
///
/// fn clones<S: CloneService>() {}
/// clones::<tower::util::BoxCloneService<u32, u32, std::convert::Infallible>>();
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}`, the inner service, is not `Clone`: `RetryLayer` sends each attempt after the first through a clone of it",
    label = "the inner service must be `Clone`",
    note = "box it as a `tower::util::BoxCloneService` rather than a `BoxService`, or put it behind a `tower::buffer::Buffer` (a handle that is `Clone`)"
)]
pub trait CloneService {
    /// Another handle on the same service.
    fn clone_service(&self) -> Self;
}

#[diagnostic::do_not_recommend]
impl<S: Clone> CloneService for S {
    fn clone_service(&self) -> Self {
        self.clone()
    }
}

/// The inner service's future is `Send`: the layer keeps it inside the
/// request's own future, which is `Send` (boxed once per request). Every
/// `Send` type; not to be implemented by hand.
///
/// ```
/// use nika_retry::tower::SendFuture;
///
/// fn sends<F: SendFuture>() {}
/// sends::<std::future::Ready<u32>>();
/// ```
#[diagnostic::on_unimplemented(
    message = "the inner service's future `{Self}` is not `Send`: `RetryLayer` runs it inside a `Send` future",
    label = "the inner service's future must be `Send`",
    note = "a fn that returns `impl Service<…>` says so: `impl Service<Req, Response = …, Error = …, Future: Send> + Clone + Send + 'static`",
    note = "a future that holds an `Rc`, a `RefCell` borrow or a `MutexGuard` across an `.await` is not `Send`: hold an `Arc`, or end the borrow before the `.await`"
)]
pub trait SendFuture: Send {}

#[diagnostic::do_not_recommend]
impl<F: Send> SendFuture for F {}
