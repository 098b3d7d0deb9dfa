use nika_retry::{retry, Classify};

#[derive(Debug, Classify)]
#[category(transient)]
struct Lost;

struct Request {
    method: String,
}

// The method's name where a `bool` belongs: "expected `bool`" at the expression.
#[retry(layer = "http", idempotent = request.method.clone())]
async fn send(request: &Request) -> Result<(), Lost> {
    let _ = request;
    Ok(())
}

fn main() {}
