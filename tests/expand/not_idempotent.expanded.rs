async fn send(&self, req: &Request) -> Result<Response, HttpError> {
    let mut __nika_call = ::nika_retry::__private::Call::new({
        const __NIKA_SITE: &::nika_retry::__private::Site = &::nika_retry::__private::Overrides::NONE
            .site(
                ::nika_retry::Layer::Http,
                ::core::concat!(::core::module_path!(), "::", "send"),
            );
        __NIKA_SITE
    });
    #[allow(unused_braces)]
    __nika_call.said_idempotent(|| -> bool { req.method().is_idempotent() });
    loop {
        let __nika_until = {
            let __nika_result = __nika_call
                .attempt(async {
                    if let ::core::option::Option::Some(__nika_ret) = ::core::option::Option::None::<
                        Result<Response, HttpError>,
                    > {
                        #[allow(unreachable_code)] return __nika_ret;
                    }
                    self.client.execute(req).await
                })
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
