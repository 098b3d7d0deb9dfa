#[automatically_derived]
impl ::nika_retry::Classify for ProviderError {
    fn category(&self) -> ::nika_retry::ErrorCategory {
        match self {
            Self::RateLimited { .. } => ::nika_retry::ErrorCategory::RateLimited,
            Self::Api { status: __nika_field, .. } => {
                ::nika_retry::__private::status_category({ __nika_field })
            }
            Self::Timeout { 0: __nika_field, .. } => {
                ::nika_retry::Classify::category({ __nika_field })
            }
        }
    }
    fn retry_after(&self) -> ::core::option::Option<::core::time::Duration> {
        match self {
            Self::RateLimited { retry_after_ms: __nika_field, .. } => {
                ::nika_retry::__private::hint_millis({ __nika_field })
            }
            Self::Api { retry_after: __nika_field, .. } => {
                ::nika_retry::__private::hint_duration({ __nika_field })
            }
            Self::Timeout { 0: __nika_field, .. } => {
                ::nika_retry::Classify::retry_after({ __nika_field })
            }
        }
    }
    fn timeout(&self) -> ::core::option::Option<&::nika_retry::TimeoutError> {
        match self {
            Self::Timeout { 0: __nika_field, .. } => {
                ::nika_retry::Classify::timeout({ __nika_field })
            }
            _ => ::core::option::Option::None,
        }
    }
    fn reached(&self) -> ::nika_retry::Reached {
        match self {
            Self::Api { status: __nika_field, .. } => {
                ::nika_retry::__private::status_reached({ __nika_field })
            }
            Self::Timeout { 0: __nika_field, .. } => {
                ::nika_retry::Classify::reached({ __nika_field })
            }
            _ => {
                match ::nika_retry::Classify::timeout(self) {
                    ::core::option::Option::Some(timeout) => {
                        ::nika_retry::Classify::reached(timeout)
                    }
                    ::core::option::Option::None => {
                        ::nika_retry::Reached::default_for(
                            ::nika_retry::Classify::category(self),
                        )
                    }
                }
            }
        }
    }
}
