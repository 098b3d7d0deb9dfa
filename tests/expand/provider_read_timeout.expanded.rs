/// Sends one completion request.
#[must_use]
pub async fn complete(&self, req: &Request) -> Result<Response, ProviderError> {
    #[allow(unused_imports)]
    use timeout as _;
    let mut __nika_call = ::nika_retry::__private::TimedCall::new(
        {
            const __NIKA_SITE: &::nika_retry::__private::Site = &::nika_retry::__private::Overrides::NONE
                .site(
                    ::nika_retry::Layer::Provider,
                    ::core::concat!(::core::module_path!(), "::", "complete"),
                );
            __NIKA_SITE
        },
        ::core::option::Option::None,
    );
    loop {
        let __nika_until = {
            let __nika_result = __nika_call
                .timed(
                    ::nika_retry::__private::AttemptLimits {
                        read: ::core::option::Option::Some(
                            ::core::time::Duration::new(120u64, 0u32),
                        ),
                        ..::nika_retry::__private::AttemptLimits::NONE
                    },
                    async {
                        if let ::core::option::Option::Some(__nika_ret) = ::core::option::Option::None::<
                            Result<Response, ProviderError>,
                        > {
                            #[allow(unreachable_code)] return __nika_ret;
                        }
                        self.send(req).await
                    },
                    ::nika_retry::__private::FromTimeout::from_timeout,
                )
                .await;
            match __nika_call
                .next(
                    { &__nika_result },
                    ::nika_retry::__private::NO_CONFIG,
                    ::core::option::Option::Some(
                        ::core::any::type_name::<Self> as fn() -> &'static str,
                    ),
                )
            {
                ::core::option::Option::Some(__nika_until) => __nika_until,
                ::core::option::Option::None => return __nika_result,
            }
        };
        ::nika_retry::__private::sleep(__nika_until).await;
    }
}
