async fn post(body: Vec<u8>) -> Result<(), HttpError> {
    let mut __nika_call = ::nika_retry::__private::Call::new({
        const __NIKA_SITE: &::nika_retry::__private::Site = &::nika_retry::__private::Overrides {
            max_attempts: ::core::option::Option::Some(4u32),
            initial_backoff: ::core::option::Option::Some(
                ::core::time::Duration::new(0u64, 100000000u32),
            ),
            jitter: ::core::option::Option::Some(0.25f32),
            retry_on: ::core::option::Option::Some(
                ::nika_retry::CategorySet::EMPTY
                    .with(::nika_retry::ErrorCategory::Transient),
            ),
            ..::nika_retry::__private::Overrides::NONE
        }
            .site(
                ::nika_retry::Layer::Http,
                ::core::concat!(::core::module_path!(), "::", "post"),
            );
        __NIKA_SITE
    });
    loop {
        let __nika_until = {
            let __nika_result = {
                let body = ::core::clone::Clone::clone(&body);
                let __nika_result = __nika_call
                    .attempt(async {
                        if let ::core::option::Option::Some(__nika_ret) = ::core::option::Option::None::<
                            Result<(), HttpError>,
                        > {
                            #[allow(unreachable_code)] return __nika_ret;
                        }
                        send(body).await
                    })
                    .await;
                __nika_result
            };
            match __nika_call
                .next(
                    { &__nika_result },
                    ::nika_retry::__private::NO_CONFIG,
                    ::core::option::Option::None,
                )
            {
                ::core::option::Option::Some(__nika_until) => __nika_until,
                ::core::option::Option::None => return __nika_result,
            }
        };
        ::nika_retry::__private::sleep(__nika_until).await;
    }
}
