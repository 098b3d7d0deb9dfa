use std::pin::Pin;
use std::task::{Context, Poll};

use futures_core::Stream;
use nika_retry::stream;

#[derive(Debug)]
struct MyError;

struct Events;

impl Stream for Events {
    type Item = Result<u32, MyError>;
    fn poll_next(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Poll::Ready(None)
    }
}

async fn open() -> Result<stream::Started<Events>, MyError> {
    stream::started(Events).await
}

fn main() {
    let _ = open();
}
