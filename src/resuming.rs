//! A streamed completion that resumes, as a user of `resume_with` writes
//! it, against the fault server's resumable answers
//! ([`fault::resumable`](crate::fault::resumable)): by cursor (the events
//! after the last one seen) or by continuation (the text so far sent back).
//! For tests/stream_resume.rs and the soak (tests/soak_resume.rs).

use std::pin::Pin;
use std::sync::{Arc, Mutex};

use eventsource_stream::{EventStreamError, Eventsource};
use futures_util::{Stream, StreamExt};
use nika_retry::stream::{Resume, Started, started};
use nika_retry::{Classify, TimeoutError, retry, timeout};

/// How a stream is resumed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Way {
    /// `/cursor/{id}?starting_after=N`: the events after the last one seen.
    Cursor,
    /// `/continue/{id}` with the text so far as the body.
    Continuation,
}

/// What can go wrong.
#[derive(Debug, thiserror::Error, Classify)]
pub enum Error {
    /// A status that is not a success, classified by it (409, a lost or
    /// repeated continuation: permanent).
    #[error("status {0}")]
    #[category(http_status = 0)]
    Status(u16),
    /// Refused, reset, or a body cut mid-stream: transient.
    #[error("request failed: {0}")]
    #[category(transparent)]
    Request(#[from] reqwest::Error),
    /// Not server-sent events.
    #[error("malformed event stream: {0}")]
    #[category(permanent)]
    Malformed(String),
    /// `read` (a stall) or `total`.
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
}

/// The events of one response: one item per event, its text.
pub type Events = Pin<Box<dyn Stream<Item = Result<String, Error>> + Send>>;

/// A client of the server at `base` (`http://127.0.0.1:PORT`).
#[derive(Clone, Debug)]
pub struct Client {
    http: reqwest::Client,
    base: String,
}

/// How one stream ended: the text the caller got, and the error that ended
/// it early, if one did.
#[derive(Debug)]
pub struct Outcome {
    /// Every event's text, in the order the caller got them.
    pub text: String,
    /// The last item, if an error.
    pub error: Option<Error>,
    /// The items the caller got.
    pub items: u64,
}

impl Client {
    /// A client of `base`.
    pub fn new(base: &str) -> Client {
        Client {
            http: reqwest::Client::new(),
            base: base.to_owned(),
        }
    }

    /// Opens stream `id` from its start; returns once its first event is in.
    /// 3 attempts, 20 ms apart at first; a stall of 300 ms is a `read`.
    #[retry(layer = "provider", backoff = "20ms", max_backoff = "200ms")]
    #[timeout(read = "300ms")]
    pub async fn open(&self, id: u64, way: Way) -> Result<Started<Events>, Error> {
        let url = self.url(id, way, None);
        started(send(&self.http, url, String::new()).await?).await
    }

    /// Stream `id` read to its end, resumed `way` after a cut if `resume`.
    pub async fn complete(&self, id: u64, way: Way, resume: bool) -> Outcome {
        let opened = self.open(id, way).await;
        let first = match opened {
            Ok(first) => first,
            Err(error) => return Outcome::failed(String::new(), error),
        };
        if !resume {
            return read(first, &Mutex::new(String::new())).await;
        }
        let so_far = Arc::new(Mutex::new(String::new()));
        let (client, text) = (self.clone(), so_far.clone());
        let resumed = first.resume_with(move |resume: Resume| {
            let (http, url, body) = match way {
                // One event per item, numbered from 0: the last one seen.
                Way::Cursor => {
                    let last = resume.delivered().checked_sub(1);
                    (
                        client.http.clone(),
                        client.url(id, way, last),
                        String::new(),
                    )
                }
                // The text the caller has, sent back as the start of the answer.
                Way::Continuation => {
                    let so_far = text.lock().expect("text").clone();
                    (client.http.clone(), client.url(id, way, None), so_far)
                }
            };
            async move { started(send(&http, url, body).await?).await }
        });
        read(resumed, &so_far).await
    }

    fn url(&self, id: u64, way: Way, after: Option<u64>) -> String {
        match (way, after) {
            (Way::Cursor, Some(n)) => format!("{}/cursor/{id}?starting_after={n}", self.base),
            (Way::Cursor, None) => format!("{}/cursor/{id}", self.base),
            (Way::Continuation, _) => format!("{}/continue/{id}", self.base),
        }
    }
}

impl Outcome {
    fn failed(text: String, error: Error) -> Outcome {
        Outcome {
            text,
            error: Some(error),
            items: 0,
        }
    }
}

/// Reads `stream` to its end, each event's text appended to `text` as it
/// comes (what a continuation sends back).
async fn read<S>(mut stream: S, text: &Mutex<String>) -> Outcome
where
    S: Stream<Item = Result<String, Error>> + Unpin,
{
    let mut items = 0;
    while let Some(item) = stream.next().await {
        items += 1;
        match item {
            Ok(event) => text.lock().expect("text").push_str(&event),
            Err(error) => {
                let text = text.lock().expect("text").clone();
                return Outcome {
                    text,
                    error: Some(error),
                    items,
                };
            }
        }
    }
    let text = text.lock().expect("text").clone();
    Outcome {
        text,
        error: None,
        items,
    }
}

/// Sends one request; its events once the headers are in.
async fn send(http: &reqwest::Client, url: String, body: String) -> Result<Events, Error> {
    let response = http.post(url).body(body).send().await?;
    let status = response.status();
    if !status.is_success() {
        return Err(Error::Status(status.as_u16()));
    }
    let events = response
        .bytes_stream()
        .eventsource()
        .map(|event| match event {
            Ok(event) => Ok(event.data),
            Err(EventStreamError::Transport(error)) => Err(Error::Request(error)),
            Err(malformed) => Err(Error::Malformed(malformed.to_string())),
        });
    Ok(Box::pin(events))
}
