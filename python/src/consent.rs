//! A registration's consents in Python (INTERFACE.md section 5): which consents a registration
//! needs at its signers' nonces, their EIP-712 typed data and digests in the registry's domain,
//! and their signatures by a local key or a caller's signer of hashes. The rules are
//! [`kya_core::registry::consent`]'s. A consent is a `dict` named by its `kind`
//! (`"AgentWalletConsent"` or `"LiabilityConsent"`), fields in snake case, numbers as `int`s.

use alloy_primitives::Address;
use kya_core::{
    api::checksum::checksummed,
    registry::consent::{self, AgentWalletConsent, Consent, LiabilityConsent, Parties},
};
use pyo3::{
    prelude::*,
    types::{PyBytes, PyDict},
};

use crate::{
    convert::{parse_address, to_py},
    error::invalid,
    eth_values::{int, u64_of, uint_of},
    keys::sign_digest,
};

/// A field of a consent `dict`, refused with its name when missing.
fn field<'py>(consent: &Bound<'py, PyDict>, name: &str) -> PyResult<Bound<'py, PyAny>> {
    consent.get_item(name)?.ok_or_else(|| invalid(format!("consent[{name:?}] is missing")))
}

fn address_field(consent: &Bound<'_, PyDict>, name: &str) -> PyResult<Address> {
    let text: String =
        field(consent, name)?.extract().map_err(|_| invalid(format!("consent[{name:?}] must be a str")))?;
    parse_address(&text, &format!("consent[{name:?}]"))
}

/// A consent from its `dict` (what [`consents_needed`] gives).
fn consent_of(consent: &Bound<'_, PyAny>) -> PyResult<Consent> {
    let consent = consent.cast::<PyDict>().map_err(|_| invalid("consent must be a dict"))?;
    let kind: String =
        field(consent, "kind")?.extract().map_err(|_| invalid("consent[\"kind\"] must be a str"))?;
    let number = |name: &str| uint_of(&field(consent, name)?, &format!("consent[{name:?}]"));
    Ok(match kind.as_str() {
        "AgentWalletConsent" => Consent::AgentWallet(AgentWalletConsent {
            agentWallet: address_field(consent, "agent_wallet")?,
            creator: address_field(consent, "creator")?,
            parentAgentId: number("parent_agent_id")?,
            nonce: number("nonce")?,
            deadline: number("deadline")?,
        }),
        "LiabilityConsent" => Consent::Liability(LiabilityConsent {
            haftungsperson: address_field(consent, "haftungsperson")?,
            creator: address_field(consent, "creator")?,
            agentWallet: address_field(consent, "agent_wallet")?,
            nonce: number("nonce")?,
            deadline: number("deadline")?,
        }),
        other => {
            return Err(invalid(format!(
                "consent[\"kind\"] is {other:?}: expected \"AgentWalletConsent\" or \"LiabilityConsent\""
            )));
        }
    })
}

/// A consent as a `dict`: its kind, its signer, and its fields.
fn consent_dict<'py>(py: Python<'py>, consent: &Consent) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item("signer", checksummed(&consent.signer()))?;
    match consent {
        Consent::AgentWallet(wallet) => {
            dict.set_item("kind", "AgentWalletConsent")?;
            dict.set_item("agent_wallet", checksummed(&wallet.agentWallet))?;
            dict.set_item("creator", checksummed(&wallet.creator))?;
            dict.set_item("parent_agent_id", int(py, wallet.parentAgentId)?)?;
            dict.set_item("nonce", int(py, wallet.nonce)?)?;
            dict.set_item("deadline", int(py, wallet.deadline)?)?;
        }
        Consent::Liability(liability) => {
            dict.set_item("kind", "LiabilityConsent")?;
            dict.set_item("haftungsperson", checksummed(&liability.haftungsperson))?;
            dict.set_item("creator", checksummed(&liability.creator))?;
            dict.set_item("agent_wallet", checksummed(&liability.agentWallet))?;
            dict.set_item("nonce", int(py, liability.nonce)?)?;
            dict.set_item("deadline", int(py, liability.deadline)?)?;
        }
    }
    Ok(dict)
}

fn registry_of(registry: &str) -> PyResult<Address> {
    parse_address(registry, "registry")
}

/// The latest consent `deadline` the registry accepts in a block at `block_timestamp` (Unix
/// seconds): 7 days after it (`MAX_CONSENT_LIFETIME`); a later one reverts `Consent deadline too
/// far`.
#[pyfunction]
pub(crate) fn latest_consent_deadline(block_timestamp: u64) -> u64 {
    consent::latest_deadline(block_timestamp)
}

/// The consents a registration by `creator` needs, at the signers' current `consentNonce`s,
/// valid until `deadline`: `{"agent_wallet": ..., "liability": ...}`, each `None` when its party
/// is the creator (the liability consent also for a child, which inherits its parent's
/// Haftungsperson). When the agent wallet is also the root's Haftungsperson and signs both, the
/// liability consent takes the nonce after the wallet's.
#[pyfunction]
#[pyo3(signature = (
    *, creator, agent_wallet, haftungsperson, parent_agent_id, wallet_nonce, haftungsperson_nonce, deadline,
))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn consents_needed<'py>(
    py: Python<'py>,
    creator: &str,
    agent_wallet: &str,
    haftungsperson: &str,
    parent_agent_id: &Bound<'py, PyAny>,
    wallet_nonce: &Bound<'py, PyAny>,
    haftungsperson_nonce: &Bound<'py, PyAny>,
    deadline: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyDict>> {
    let parties = Parties {
        creator: parse_address(creator, "creator")?,
        agent_wallet: parse_address(agent_wallet, "agent_wallet")?,
        haftungsperson: parse_address(haftungsperson, "haftungsperson")?,
        parent_agent_id: u64_of(parent_agent_id, "parent_agent_id")?,
    };
    let needed = parties.consents_needed(
        uint_of(wallet_nonce, "wallet_nonce")?,
        uint_of(haftungsperson_nonce, "haftungsperson_nonce")?,
        uint_of(deadline, "deadline")?,
    );
    let dict = PyDict::new(py);
    dict.set_item("agent_wallet", needed.agent_wallet.as_ref().map(|c| consent_dict(py, c)).transpose()?)?;
    dict.set_item("liability", needed.liability.as_ref().map(|c| consent_dict(py, c)).transpose()?)?;
    Ok(dict)
}

/// The EIP-712 typed data of a consent for `eth_signTypedData_v4`, in the domain of the registry
/// at `registry` on `chain_id`.
#[pyfunction]
#[pyo3(signature = (consent, *, chain_id, registry))]
pub(crate) fn consent_typed_data<'py>(
    py: Python<'py>,
    consent: &Bound<'py, PyAny>,
    chain_id: u64,
    registry: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let typed = consent_of(consent)?.typed_data(chain_id, registry_of(registry)?);
    to_py(py, &serde_json::to_value(typed).map_err(invalid)?)
}

/// The 32-byte EIP-712 digest a consent's signer signs.
#[pyfunction]
#[pyo3(signature = (consent, *, chain_id, registry))]
pub(crate) fn consent_digest<'py>(
    py: Python<'py>,
    consent: &Bound<'py, PyAny>,
    chain_id: u64,
    registry: &str,
) -> PyResult<Bound<'py, PyBytes>> {
    let digest = consent_of(consent)?.signing_digest(&consent::domain(chain_id, registry_of(registry)?));
    Ok(PyBytes::new(py, digest.as_slice()))
}

/// The consent's 65-byte signature (`v` 27/28) by `private_key` (a `PrivateKey`, or its text or
/// bytes), or by `signer`, a callable given the 32-byte digest. The registry accepts it when it is
/// the consent's signer's.
#[pyfunction]
#[pyo3(signature = (consent, *, chain_id, registry, private_key=None, signer=None))]
pub(crate) fn sign_consent<'py>(
    py: Python<'py>,
    consent: &Bound<'py, PyAny>,
    chain_id: u64,
    registry: &str,
    private_key: Option<&Bound<'py, PyAny>>,
    signer: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyBytes>> {
    let digest = consent_of(consent)?.signing_digest(&consent::domain(chain_id, registry_of(registry)?));
    sign_digest(py, &digest, private_key, signer)
}
