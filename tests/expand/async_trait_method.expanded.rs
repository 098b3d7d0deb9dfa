fn run<'life0, 'async_trait>(
    &'life0 self,
    input: String,
) -> ::core::pin::Pin<
    Box<
        dyn ::core::future::Future<
            Output = Result<usize, ToolError>,
        > + ::core::marker::Send + 'async_trait,
    >,
>
where
    'life0: 'async_trait,
    Self: 'async_trait,
{
    ::std::boxed::Box::pin(async move {
        if let ::core::option::Option::Some(__ret) = ::core::option::Option::None::<
            Result<usize, ToolError>,
        > {
            #[allow(unreachable_code)] return __ret;
        }
        let __self = self;
        let input = input;
        #[allow(unused_imports)]
        use retry as _;
        let mut __nika_call = ::nika_retry::__private::TimedCall::new(
            {
                const __NIKA_SITE: &::nika_retry::__private::Site = &::nika_retry::__private::Overrides::NONE
                    .site(
                        ::nika_retry::Layer::Tool,
                        ::core::concat!(::core::module_path!(), "::", "run"),
                    );
                __NIKA_SITE
            },
            ::core::option::Option::Some(::core::time::Duration::new(300u64, 0u32)),
        );
        loop {
            let __nika_until = {
                let __nika_result = __nika_call
                    .timed(
                        ::nika_retry::__private::AttemptLimits::NONE,
                        async {
                            if let ::core::option::Option::Some(__nika_ret) = ::core::option::Option::None::<
                                Result<usize, ToolError>,
                            > {
                                #[allow(unreachable_code)] return __nika_ret;
                            }
                            let __ret: Result<usize, ToolError> = { Ok(input.len()) };
                            #[allow(unreachable_code)] __ret
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
    })
}
