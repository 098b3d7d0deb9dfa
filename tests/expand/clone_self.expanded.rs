async fn run(self: Arc<Self>, (a, b): (String, u32)) -> Result<u32, ProviderError> {
    let mut __nika_call = nr::__private::Call::new({
        const __NIKA_SITE: &nr::__private::Site = &nr::__private::Overrides::NONE
            .site(
                nr::Layer::Provider,
                ::core::concat!(::core::module_path!(), "::", "run"),
            );
        __NIKA_SITE
    });
    loop {
        let __nika_until = {
            let __nika_result = {
                let mut __nika_self = ::core::clone::Clone::clone(&self);
                let a = ::core::clone::Clone::clone(&a);
                let __nika_result = __nika_call
                    .attempt(async {
                        if let ::core::option::Option::Some(__nika_ret) = ::core::option::Option::None::<
                            Result<u32, ProviderError>,
                        > {
                            #[allow(unreachable_code)] return __nika_ret;
                        }
                        __nika_self.consume(a).await?;
                        Ok(b)
                    })
                    .await;
                __nika_result
            };
            match __nika_call
                .next(
                    { &__nika_result },
                    nr::__private::NO_CONFIG,
                    ::core::option::Option::Some(
                        ::core::any::type_name::<Self> as fn() -> &'static str,
                    ),
                )
            {
                ::core::option::Option::Some(__nika_until) => __nika_until,
                ::core::option::Option::None => return __nika_result,
            }
        };
        nr::__private::sleep(__nika_until).await;
    }
}
