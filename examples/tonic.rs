//! A tonic client under `RetryLayer`: a unary gRPC call retried as gRPC's
//! retry design (A6) says — `UNAVAILABLE` sent again, `RESOURCE_EXHAUSTED`
//! waiting the server's `grpc-retry-pushback-ms`, every other code handed
//! back — through the same engine as `#[retry(layer = "provider")]`.
//!
//! ```text
//! cargo run --example tonic
//! ```
//!
//! A tonic `Channel` takes `http::Request`s whose body is a stream it
//! cannot send twice, so the layer goes above it, where the message still
//! is: around the call (`tonic::client::Grpc::unary` here, a generated
//! client's method in yours) in a `tower::service_fn`, with the
//! `nika_retry::tower::Tonic` protocol, which replays a
//! `tonic::Request<M>` by cloning its message, metadata and extensions.
//! `nika_retry::Idempotent::NO` in a request's extensions keeps a call
//! that may have acted from being sent twice.
//!
//! Self-contained: it compiles from the published crates and its own code.
//! It starts an in-process tonic server on 127.0.0.1 (`serve`, at the
//! bottom: no `.proto`, no generated code, a UTF-8 codec written by hand)
//! that plays each fault once. With your generated client, call its method
//! in the `service_fn` instead of `Grpc::unary`. Needs:
//!
//! ```toml
//! nika-retry = { version = "0.2", features = ["tower", "tonic"] }
//! tonic = { version = "0.14", features = ["server", "channel"] }
//! tower = { version = "0.5", features = ["util"] }
//! bytes = "1"
//! thiserror = "2"
//! tokio = { version = "1", features = ["macros", "rt-multi-thread", "net", "time"] }
//! tokio-stream = { version = "0.1", features = ["net"] }
//! ```
use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Buf, BufMut};
use nika_retry::tower::{RetryLayer, Tonic};
use nika_retry::upstream::Held;
use nika_retry::{Classify, ConfigError, Idempotent, Layer, RetryConfig, TimeoutError};
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::{Code, Request, Response, Status};
use tower::util::BoxCloneService;
use tower::{ServiceBuilder, ServiceExt};

/// The call's error: tonic's status (classified after A6 with feature
/// `tonic`), and the layer's own failures.
#[derive(Debug, thiserror::Error, Classify)]
pub enum RpcError {
    #[error(transparent)]
    #[category(transparent)]
    Status(#[from] Status),
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
    #[error(transparent)]
    #[category(transparent)]
    Held(#[from] Held),
}

/// The method the example calls.
const SAY: &str = "/echo.Echo/Say";

/// A `Say` client whose calls are retried by the provider layer's policy.
pub type Say = BoxCloneService<Request<String>, Response<String>, RpcError>;

/// The client over `channel`.
pub fn say(channel: tonic::transport::Channel) -> Result<Say, ConfigError> {
    let grpc = tonic::client::Grpc::new(channel);
    // The call itself: what a generated client's method does.
    let call = tower::service_fn(move |request: Request<String>| {
        let mut grpc = grpc.clone();
        async move {
            grpc.ready()
                .await
                .map_err(|e| Status::unavailable(e.to_string()))?;
            let path = http::uri::PathAndQuery::from_static(SAY);
            grpc.unary(request, path, Utf8).await
        }
    });
    // The provider layer's 3 attempts, with short backoffs for the example.
    let config = RetryConfig::for_layer(Layer::Provider)
        .with_initial_backoff(Duration::from_millis(50))?
        .with_max_backoff(Duration::from_millis(200))?;
    Ok(BoxCloneService::new(
        ServiceBuilder::new()
            .layer(
                RetryLayer::new(Layer::Provider)
                    .config(config)
                    .protocol(Tonic),
            )
            .map_err(RpcError::from)
            .service(call),
    ))
}

/// `text` through `client`; `acts`: whether a second call could act twice.
pub async fn send(client: &Say, text: &str, acts: bool) -> Result<String, RpcError> {
    let mut request = Request::new(text.to_owned());
    if acts {
        request.extensions_mut().insert(Idempotent::NO);
    }
    let response = client.clone().oneshot(request).await?;
    Ok(response.into_inner())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = serve(vec![
        Reply::Fail(Code::Unavailable, None),
        Reply::Echo,
        Reply::Fail(Code::ResourceExhausted, Some(300)),
        Reply::Echo,
        Reply::ActThenFail,
    ])
    .await?;
    let channel = tonic::transport::Endpoint::from_shared(server.url.clone())?.connect_lazy();
    let client = say(channel)?;
    let seen = || server.calls.load(Ordering::SeqCst);

    let echo = send(&client, "hello", false).await?;
    println!(
        "{echo:?} after {} calls (UNAVAILABLE, then the answer)",
        seen()
    );
    let started = tokio::time::Instant::now();
    let echo = send(&client, "again", false).await?;
    println!(
        "{echo:?} after {:?} (RESOURCE_EXHAUSTED with a pushback of 300 ms)",
        started.elapsed()
    );
    let paid = send(&client, "pay", true).await;
    println!(
        "{:?}: sent once, {} calls in all",
        paid.err().map(|e| e.to_string()),
        seen()
    );
    Ok(())
}

/// What the server does with one call.
#[derive(Clone, Copy, Debug)]
pub enum Reply {
    /// Answers with the message.
    Echo,
    /// Fails with this code, and a pushback in ms if any.
    Fail(Code, Option<i64>),
    /// Acts (counts an effect), then fails `UNAVAILABLE` as a server that
    /// crashed after it acted.
    ActThenFail,
}

/// An in-process tonic server on 127.0.0.1: each call gets the next reply
/// (an echo once they are spent).
pub struct Server {
    pub url: String,
    pub calls: Arc<AtomicUsize>,
    pub effects: Arc<AtomicUsize>,
}

pub async fn serve(replies: Vec<Reply>) -> std::io::Result<Server> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let replies = Arc::new(Mutex::new(VecDeque::from(replies)));
    let calls = Arc::new(AtomicUsize::new(0));
    let effects = Arc::new(AtomicUsize::new(0));
    let (counted, acted) = (calls.clone(), effects.clone());
    let handler = tower::service_fn(move |request: Request<String>| {
        counted.fetch_add(1, Ordering::SeqCst);
        let reply = replies
            .lock()
            .map_or(Reply::Echo, |mut r| r.pop_front().unwrap_or(Reply::Echo));
        let acted = acted.clone();
        async move {
            match reply {
                Reply::Echo => {
                    acted.fetch_add(1, Ordering::SeqCst);
                    Ok(Response::new(request.into_inner()))
                }
                Reply::Fail(code, pushback) => {
                    let mut status = Status::new(code, "scripted");
                    if let Some(ms) = pushback
                        && let Ok(value) = ms.to_string().parse()
                    {
                        status
                            .metadata_mut()
                            .insert("grpc-retry-pushback-ms", value);
                    }
                    Err(status)
                }
                Reply::ActThenFail => {
                    acted.fetch_add(1, Ordering::SeqCst);
                    Err(Status::unavailable("crashed after it acted"))
                }
            }
        }
    });
    // Every path goes to `Say`: one method is all the example has.
    let routes = tower::service_fn(move |request: http::Request<tonic::body::Body>| {
        let handler = handler.clone();
        async move {
            let mut grpc = tonic::server::Grpc::new(Utf8);
            Ok::<_, Infallible>(grpc.unary(handler, request).await)
        }
    });
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
    tokio::spawn(tonic::transport::Server::builder().serve_with_incoming(routes, incoming));
    Ok(Server {
        url,
        calls,
        effects,
    })
}

/// A message as its UTF-8 bytes: the codec generated code would bring.
#[derive(Clone, Copy, Debug, Default)]
pub struct Utf8;

impl Codec for Utf8 {
    type Encode = String;
    type Decode = String;
    type Encoder = Utf8;
    type Decoder = Utf8;

    fn encoder(&mut self) -> Utf8 {
        Utf8
    }

    fn decoder(&mut self) -> Utf8 {
        Utf8
    }
}

impl Encoder for Utf8 {
    type Item = String;
    type Error = Status;

    fn encode(&mut self, item: String, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put_slice(item.as_bytes());
        Ok(())
    }
}

impl Decoder for Utf8 {
    type Item = String;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<String>, Status> {
        let bytes = src.copy_to_bytes(src.remaining());
        String::from_utf8(bytes.to_vec())
            .map(Some)
            .map_err(|e| Status::internal(e.to_string()))
    }
}

/// What the example shows, on a real socket (`cargo test --example tonic`).
#[cfg(test)]
mod tests {
    use super::*;

    async fn start(replies: Vec<Reply>) -> (Server, Say) {
        let server = serve(replies).await.unwrap();
        let channel = tonic::transport::Endpoint::from_shared(server.url.clone())
            .unwrap()
            .connect_lazy();
        let client = say(channel).unwrap();
        (server, client)
    }

    #[tokio::test]
    async fn unavailable_then_ok_is_two_calls() {
        let (server, client) = start(vec![Reply::Fail(Code::Unavailable, None)]).await;
        assert_eq!(send(&client, "hi", false).await.unwrap(), "hi");
        assert_eq!(server.calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_call_that_acted_and_is_not_idempotent_is_one_call() {
        let (server, client) = start(vec![Reply::ActThenFail]).await;
        let error = send(&client, "pay", true).await.unwrap_err();
        assert!(
            matches!(&error, RpcError::Status(s) if s.code() == Code::Unavailable),
            "{error:?}"
        );
        assert_eq!(server.calls.load(Ordering::SeqCst), 1);
        assert_eq!(server.effects.load(Ordering::SeqCst), 1);

        // The same fault on a call that says nothing: sent again.
        let (server, client) = start(vec![Reply::ActThenFail]).await;
        assert_eq!(send(&client, "read", false).await.unwrap(), "read");
        assert_eq!(server.calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn resource_exhausted_waits_its_pushback() {
        let (server, client) = start(vec![Reply::Fail(Code::ResourceExhausted, Some(400))]).await;
        let started = tokio::time::Instant::now();
        assert_eq!(send(&client, "hi", false).await.unwrap(), "hi");
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(400), "{waited:?}");
        assert!(waited < Duration::from_secs(3), "{waited:?}");
        assert_eq!(server.calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_negative_pushback_and_other_codes_are_handed_back_at_once() {
        let (server, client) = start(vec![
            Reply::Fail(Code::ResourceExhausted, Some(-1)),
            Reply::Fail(Code::InvalidArgument, None),
        ])
        .await;
        let error = send(&client, "a", false).await.unwrap_err();
        assert!(
            matches!(&error, RpcError::Status(s) if s.code() == Code::ResourceExhausted),
            "{error:?}"
        );
        let error = send(&client, "b", false).await.unwrap_err();
        assert!(
            matches!(&error, RpcError::Status(s) if s.code() == Code::InvalidArgument),
            "{error:?}"
        );
        assert_eq!(server.calls.load(Ordering::SeqCst), 2);
    }
}
