//! What one request says of itself, over the adapter's options: request
//! extensions both adapters read ([`Idempotent`], [`Cost`]).

use super::options::Options;

/// A request extension: whether this request may be sent again whatever
/// its failed attempt reached, over the adapter's
/// [`idempotent`](crate::tower::RetryLayer::idempotent) and the method's
/// (RFC 9110) for this request only. A chat completion `POST` is
/// [`Idempotent::YES`] (a second one only generates the answer again); a
/// payment through the same client is not.
///
/// On an `http::Request` (the `tower` layer): its extensions; on a
/// `reqwest_middleware` request: `RequestBuilder::with_extension`.
///
/// ```
/// use nika_retry::Idempotent;
///
/// let chat = http::Request::post("http://localhost/v1/chat/completions")
///     .extension(Idempotent::YES)
///     .body(String::from("{}"))
///     .unwrap();
/// assert_eq!(chat.extensions().get(), Some(&Idempotent::new(true)));
/// assert!(Idempotent::YES.get() && !Idempotent::NO.get());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Idempotent(bool);

impl Idempotent {
    /// May be sent again whatever it reached.
    pub const YES: Idempotent = Idempotent(true);
    /// Sent again only after a failure that certainly had no effect.
    pub const NO: Idempotent = Idempotent(false);

    /// [`YES`](Idempotent::YES) or [`NO`](Idempotent::NO), as `idempotent` says.
    pub const fn new(idempotent: bool) -> Idempotent {
        Idempotent(idempotent)
    }

    /// Whether the request is idempotent.
    pub const fn get(self) -> bool {
        self.0
    }
}

/// A request extension: what each attempt of this request spends of the
/// upstream's token limit (prompt tokens plus `max_tokens`), over the
/// adapter's [`cost`](crate::tower::RetryLayer::cost), for this request
/// only; as `#[retry(cost = …)]`, it means something only with an
/// upstream.
///
/// ```
/// use nika_retry::Cost;
///
/// let prompt = "tell a story";
/// let chat = http::Request::post("http://localhost/v1/chat/completions")
///     .extension(Cost::new(prompt.len() as u32 / 4 + 512))
///     .body(String::from(prompt))
///     .unwrap();
/// assert_eq!(chat.extensions().get::<Cost>().map(|c| c.get()), Some(515));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Cost(u32);

impl Cost {
    /// Each attempt spends `cost` (saturated below the crate's "unknown"
    /// mark, as `cost = …` is).
    pub const fn new(cost: u32) -> Cost {
        Cost(cost)
    }

    /// What each attempt spends.
    pub const fn get(self) -> u32 {
        self.0
    }
}

/// The marks a request carries, read from its extensions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Marks {
    pub(crate) idempotent: Option<Idempotent>,
    pub(crate) cost: Option<Cost>,
}

impl Marks {
    /// The marks in `extensions`.
    pub(crate) fn of(extensions: &http::Extensions) -> Marks {
        Marks {
            idempotent: extensions.get().copied(),
            cost: extensions.get().copied(),
        }
    }

    /// `options` for this request: `None` when it says nothing of its own
    /// (the adapter's options then serve it unchanged, not copied).
    pub(crate) fn over(self, options: &Options) -> Option<Options> {
        if self == Marks::default() {
            return None;
        }
        let mut options = options.clone();
        if let Some(Idempotent(idempotent)) = self.idempotent {
            options = options.idempotent(idempotent);
        }
        if let Some(Cost(cost)) = self.cost {
            options = options.cost(cost);
        }
        Some(options)
    }
}
