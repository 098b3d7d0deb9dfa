use nika_retry::timeout;

#[timeout(layer = "tool", attempt = "5s")]
async fn render() -> Result<String, std::fmt::Error> {
    Ok(String::new())
}

fn main() {}
