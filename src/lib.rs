//! Shared helpers for the integration tests and examples of nika-retry.
