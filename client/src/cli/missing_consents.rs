//! The answer of `kya register` when consents are missing and nothing was sent: what
//! `--json` prints, and what the text rendering reads. Its own module so that the command
//! (which fills it) and the rendering (which prints it) both depend on it, not on each other.

use alloy::primitives::{Address, B256};
use kya_core::registry::consent::{ConsentKind, ConsentTypedData};
use serde::Serialize;

/// The answer of a registration that lacks consents, as `--json` prints it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ConsentsNeeded<'a> {
    /// Always false: nothing was sent.
    pub(crate) sent: bool,
    pub(crate) chain_id: u64,
    #[serde(serialize_with = "kya_core::api::checksum::serialize")]
    pub(crate) registry: Address,
    /// The registering signer, whom the consents name.
    #[serde(serialize_with = "kya_core::api::checksum::serialize")]
    pub(crate) creator: Address,
    /// Unix seconds: what `--consent-deadline` must say with the signatures.
    pub(crate) deadline: u64,
    pub(crate) deadline_iso: String,
    /// Those still to sign, the wallet's first.
    pub(crate) consents: Vec<NeededConsent<'a>>,
}

/// One consent still to sign.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NeededConsent<'a> {
    pub(crate) consent: ConsentKind,
    #[serde(serialize_with = "kya_core::api::checksum::serialize")]
    pub(crate) signer: Address,
    /// The option that takes its signature back.
    pub(crate) flag: &'static str,
    /// The option that signs it here with the signer's key.
    pub(crate) key_flag: &'static str,
    /// The EIP-712 digest: what a key signs without hashing it again.
    pub(crate) digest: B256,
    /// For `eth_signTypedData_v4`.
    pub(crate) typed_data: &'a ConsentTypedData,
}
