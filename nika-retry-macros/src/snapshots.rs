//! Expansion snapshots: the generated code of a few typical inputs, pretty
//! printed and checked into `tests/expand/`, so that a change to what the
//! macros generate shows in review. `NIKA_BLESS=1 cargo test` rewrites them.

use std::path::PathBuf;

use proc_macro2::TokenStream;
use quote::quote;

use crate::call::{self, Kind};

fn check(name: &str, expanded: TokenStream) {
    let file: syn::File = syn::parse2(expanded).expect("the expansion parses as a file");
    let pretty = prettyplease::unparse(&file);
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/expand")
        .join(format!("{name}.expanded.rs"));
    if std::env::var_os("NIKA_BLESS").is_some() {
        std::fs::write(&path, &pretty).expect("write the snapshot");
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("missing {}; run with NIKA_BLESS=1", path.display()));
    assert!(
        want == pretty,
        "{name}: the expansion changed; review it and run with NIKA_BLESS=1\n--- want\n{want}\n--- got\n{pretty}"
    );
}

#[test]
fn provider_method_with_read_timeout() {
    let input = quote! {
        /// Sends one completion request.
        #[timeout(read = "120s")]
        #[must_use]
        pub async fn complete(&self, req: &Request) -> Result<Response, ProviderError> {
            self.send(req).await
        }
    };
    check(
        "provider_read_timeout",
        call::expand(Kind::Retry, quote!(layer = "provider"), input),
    );
}

#[test]
fn http_fn_with_literals_and_clone() {
    let input = quote! {
        async fn post(body: Vec<u8>) -> Result<(), HttpError> {
            send(body).await
        }
    };
    let args = quote!(
        layer = "http",
        attempts = 4,
        backoff = "100ms",
        jitter = 0.25,
        on = [transient],
        clone(body)
    );
    check(
        "http_literals_clone",
        call::expand(Kind::Retry, args, input),
    );
}

#[test]
fn async_trait_method() {
    let input = quote! {
        fn run<'life0, 'async_trait>(
            &'life0 self,
            input: String,
        ) -> ::core::pin::Pin<Box<dyn ::core::future::Future<Output = Result<usize, ToolError>> + ::core::marker::Send + 'async_trait>>
        where
            'life0: 'async_trait,
            Self: 'async_trait,
        {
            Box::pin(async move {
                if let ::core::option::Option::Some(__ret) = ::core::option::Option::None::<Result<usize, ToolError>> {
                    #[allow(unreachable_code)]
                    return __ret;
                }
                let __self = self;
                let input = input;
                let __ret: Result<usize, ToolError> = { Ok(input.len()) };
                #[allow(unreachable_code)]
                __ret
            })
        }
    };
    check(
        "async_trait_method",
        call::expand(Kind::Timeout, quote!(total = "5m"), {
            let mut with_retry = quote!(#[retry(layer = "tool")]);
            with_retry.extend(input);
            with_retry
        }),
    );
}

#[test]
fn coercing_return() {
    let input = quote! {
        async fn name(&self) -> Result<&str, ProviderError> {
            if self.buf.is_empty() {
                return Ok("none");
            }
            Ok(&self.buf)
        }
    };
    check(
        "coercing_return",
        call::expand(Kind::Retry, quote!(layer = "provider"), input),
    );
}

#[test]
fn clone_self() {
    let input = quote! {
        async fn run(mut self: Arc<Self>, (a, b): (String, u32)) -> Result<u32, ProviderError> {
            self.consume(a).await?;
            Ok(b)
        }
    };
    check(
        "clone_self",
        call::expand(
            Kind::Retry,
            quote!(layer = "provider", clone(self, a), crate = "nr"),
            input,
        ),
    );
}

#[test]
fn timeout_alone() {
    let input = quote! {
        async fn run_task(&self, task: &Task) -> Result<Report, TaskError> {
            self.execute(task).await
        }
    };
    check(
        "timeout_alone",
        call::expand(
            Kind::Timeout,
            quote!(
                layer = "task",
                total = self.limits.max_duration,
                attempt = "30s"
            ),
            input,
        ),
    );
}

#[test]
fn config_expr() {
    let input = quote! {
        async fn complete(&self, req: &Request) -> Result<Response, ProviderError> {
            self.send(req).await
        }
    };
    check(
        "config_expr",
        call::expand(
            Kind::Retry,
            quote!(
                layer = "provider",
                attempts = 5,
                config = self.options.retry.clone()
            ),
            input,
        ),
    );
}

#[test]
fn derive_provider_error() {
    let input = quote! {
        pub enum ProviderError {
            #[category(rate_limited, retry_after_ms = retry_after_ms)]
            RateLimited { retry_after_ms: Option<u64> },
            #[category(http_status = status, retry_after = retry_after)]
            Api { status: u16, message: String, retry_after: Option<Duration> },
            #[category(transparent)]
            Timeout(nika_retry::TimeoutError),
        }
    };
    check("derive_provider_error", crate::classify::derive(input));
}

#[test]
fn provider_fn_returning_a_started_stream() {
    let input = quote! {
        async fn stream(&self) -> Result<Started<Events>, ProviderError> {
            started(self.events().await?).await
        }
    };
    check(
        "started_stream",
        call::expand(Kind::Retry, quote!(layer = "provider"), input),
    );
}

#[test]
fn not_idempotent_at_run_time() {
    let input = quote! {
        async fn send(&self, req: &Request) -> Result<Response, HttpError> {
            self.client.execute(req).await
        }
    };
    check(
        "not_idempotent",
        call::expand(
            Kind::Retry,
            quote!(layer = "http", idempotent = req.method().is_idempotent()),
            input,
        ),
    );
}

#[test]
fn provider_method_on_an_upstream() {
    let input = quote! {
        async fn complete(&self, req: &Request) -> Result<Response, ProviderError> {
            self.send(req).await
        }
    };
    check(
        "upstream",
        call::expand(
            Kind::Retry,
            quote!(layer = "provider", upstream = self.upstream),
            input,
        ),
    );
}
