use nika_retry::retry;

#[retry(layer = "provider")]
struct Client;

fn main() {}
