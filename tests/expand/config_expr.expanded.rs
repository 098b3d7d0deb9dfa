async fn complete(&self, req: &Request) -> Result<Response, ProviderError> {
    let mut __nika_call = ::nika_retry::__private::Call::new({
        const __NIKA_SITE: &::nika_retry::__private::Site = &::nika_retry::__private::Overrides {
            max_attempts: ::core::option::Option::Some(5u32),
            ..::nika_retry::__private::Overrides::NONE
        }
            .site(
                ::nika_retry::Layer::Provider,
                ::core::concat!(::core::module_path!(), "::", "complete"),
            );
        __NIKA_SITE
    });
    loop {
        let __nika_until = {
            let __nika_result = __nika_call
                .attempt(async {
                    if let ::core::option::Option::Some(__nika_ret) = ::core::option::Option::None::<
                        Result<Response, ProviderError>,
                    > {
                        #[allow(unreachable_code)] return __nika_ret;
                    }
                    self.send(req).await
                })
                .await;
            match __nika_call
                .next(
                    { &__nika_result },
                    || ::nika_retry::__private::IntoConfig::into_config(
                        self.options.retry.clone(),
                    ),
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
