//! The HTTP surface: the routes and their answers ([`server`]), the OpenAPI document and its
//! reference page, and the in-memory limit of the read endpoints. Handlers are thin: they parse,
//! call the [`crate::Relayer`], and answer.

pub mod openapi;
pub(crate) mod read_limit;
pub(crate) mod reference;
pub mod server;
pub(crate) mod status;
