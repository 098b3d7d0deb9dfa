//! What the check of moved arguments must leave compiling: arguments that
//! are `Copy` (which only rustc knows), and every use the macro cannot be
//! sure moves the argument (a shadowing name, a `let _`, a partial
//! destructuring, a name a macro binds, a `&mut` reborrowed, an alias of a
//! reference). Each compiled before the check.
#![deny(warnings)]

use nika_retry::{retry, Classify};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("flaky")]
    #[category(transient)]
    Flaky,
}

#[derive(Clone, Copy)]
struct Id(u32);

fn take<T>(value: T) -> T {
    value
}

#[retry(layer = "provider")]
async fn copies<T: Copy>(n: u32, id: Id, generic: T, opaque: impl Copy) -> Result<u32, Error> {
    let kept = id;
    take(generic);
    take(opaque);
    Ok(take(n) + kept.0)
}

struct Request {
    id: u32,
    body: String,
}

#[retry(layer = "provider")]
async fn not_moves(body: String, request: Request, lent: String) -> Result<usize, Error> {
    let _ = lent;
    let Request { id, .. } = request;
    let body = &body;
    Ok(take(body).len() + id as usize + request.body.len())
}

type Out<'a> = &'a mut Vec<u8>;

fn push(out: &mut Vec<u8>) -> usize {
    out.push(1);
    out.len()
}

#[retry(layer = "provider")]
async fn reborrows(out: &mut Vec<u8>, aliased: Out<'_>) -> Result<usize, Error> {
    Ok(push(out) + push(aliased))
}

macro_rules! lend {
    ($name:ident) => {
        let $name = &$name;
    };
}

#[retry(layer = "provider")]
async fn shadowed_by_a_macro(body: String) -> Result<usize, Error> {
    lend!(body);
    Ok(take(body).len())
}

fn main() {
    let mut out = Vec::new();
    let mut aliased = Vec::new();
    let request = Request {
        id: 1,
        body: String::new(),
    };
    let _ = (
        copies(1, Id(2), 3u8, 4u16),
        not_moves(String::new(), request, String::new()),
        reborrows(&mut out, &mut aliased),
        shadowed_by_a_macro(String::new()),
    );
}
