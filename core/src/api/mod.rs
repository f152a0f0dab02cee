//! The HTTP API's views and inputs: the JSON types of its answers (the edge API's and the
//! relayer's), the validation of what a request names, and the client a request counts against.
//!
//! - [`view`]: the JSON views of records.
//! - [`query`]: path segments and query parameters validated, with the API's 400 messages.
//! - [`pagination`]: pages of `/agents` and of `/agent/:id/revenue`.
//! - `kya`: the KYA result of `/kya/:wallet` and a provider's decision ([`crate::KyaResult`]).
//! - [`relayer_view`]: the gasless relayer's answers.
//! - [`client_ip`]: which client a rate limit or a budget share counts a request against.
//! - [`time`]: Unix seconds to the API's timestamps and back.
//! - [`checksum`]: addresses as the API writes them, EIP-55 checksummed.
//! - `openapi_testing` (feature `test-util`): the services' OpenAPI documents read in tests.

pub mod checksum;
pub mod client_ip;
pub(crate) mod kya;
#[cfg(any(test, feature = "test-util"))]
pub mod openapi_testing;
pub mod pagination;
pub mod query;
pub mod relayer_view;
pub mod time;
pub mod view;
