async fn run_task(&self, task: &Task) -> Result<Report, TaskError> {
    ::nika_retry::__private::once(
            {
                const __NIKA_SITE: &::nika_retry::__private::Site = &::nika_retry::__private::Overrides::NONE
                    .site(
                        ::nika_retry::Layer::Task,
                        ::core::concat!(::core::module_path!(), "::", "run_task"),
                    );
                __NIKA_SITE
            },
            ::nika_retry::__private::IntoLimit::into_limit(self.limits.max_duration),
            ::nika_retry::__private::AttemptLimits {
                attempt: ::core::option::Option::Some(
                    ::core::time::Duration::new(30u64, 0u32),
                ),
                ..::nika_retry::__private::AttemptLimits::NONE
            },
            async {
                if let ::core::option::Option::Some(__nika_ret) = ::core::option::Option::None::<
                    Result<Report, TaskError>,
                > {
                    #[allow(unreachable_code)] return __nika_ret;
                }
                self.execute(task).await
            },
            ::nika_retry::__private::FromTimeout::from_timeout,
        )
        .await
}
