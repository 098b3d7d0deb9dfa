use nika_retry::retry;

#[derive(Debug)]
struct PlainError;

#[retry(layer = "provider")]
async fn call() -> Result<(), PlainError> {
    Ok(())
}

fn main() {}
