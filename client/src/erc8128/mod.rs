//! ERC-8128 signed HTTP requests for agents and providers: [`RequestSigner`] signs an agent's
//! requests (`kya_core::erc8128` signs, this module adds the clock and a random nonce);
//! [`Verifier`] has the API check a request a provider received and answers a [`Verdict`].

mod sign;
mod verify;

pub use sign::{RequestSignature, RequestSigner, fresh_nonce};
pub(crate) use verify::Origin;
pub use verify::{ReceivedRequest, SignedBy, Verdict, Verifier};
