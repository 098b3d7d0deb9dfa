async fn complete(&self, req: &Request) -> Result<Response, ProviderError> {
    let mut __nika_call = ::nika_retry::__private::Call::new({
        const __NIKA_SITE: &::nika_retry::__private::Site = &::nika_retry::__private::Overrides::NONE
            .site(
                ::nika_retry::Layer::Provider,
                ::core::concat!(::core::module_path!(), "::", "complete"),
            );
        __NIKA_SITE
    });
    match ::nika_retry::__private::AtUpstream::new(
        ::nika_retry::__private::AsUpstream::as_upstream(&(self.upstream)),
    ) {
        mut __nika_turn => {
            loop {
                if let ::core::option::Option::Some(__nika_admitted_at) = __nika_turn
                    .admit()
                {
                    match __nika_call.wait_at(&mut __nika_turn, __nika_admitted_at).await
                    {
                        ::core::result::Result::Ok(()) => {}
                        ::core::result::Result::Err(__nika_held) => {
                            return ::core::result::Result::Err(
                                ::nika_retry::__private::FromHeld::from_held(__nika_held),
                            );
                        }
                    }
                }
                let __nika_until = {
                    let __nika_result = __nika_call
                        .attempt(
                            ::nika_retry::__private::WithUpstream::new(
                                &__nika_turn,
                                async {
                                    if let ::core::option::Option::Some(__nika_ret) = ::core::option::Option::None::<
                                        Result<Response, ProviderError>,
                                    > {
                                        #[allow(unreachable_code)] return __nika_ret;
                                    }
                                    self.send(req).await
                                },
                            ),
                        )
                        .await;
                    match __nika_call
                        .next_after(
                            &mut __nika_turn,
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
    }
}
