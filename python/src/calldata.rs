//! The registry's calls in Python, as kya-core's `sol!` bindings encode them: the call data of
//! each write an agent's side makes (the `data` of a gasless request), with the registry's string
//! limits checked before anything is signed; the gas a forward request gives it; what a
//! registration's hashes are made of; and the one view the consent flow reads, `consentNonce`.

use alloy_primitives::{B256, U256};
use alloy_sol_types::SolCall;
use kya_core::{
    chain::abi::AgentRegistry,
    registry::{
        consent::{
            self, ConsentSignatures, MAX_CATEGORY_BYTES, MAX_CURRENCY_BYTES, MAX_OPERATIONAL_SCOPE_BYTES,
        },
        gas, hashes,
    },
};
use pyo3::{prelude::*, types::PyBytes};

use crate::{
    convert::parse_address,
    error::invalid,
    eth_values::{bytes_of, hash_of, int, uint_of},
};

fn encoded<'py>(py: Python<'py>, call: &impl SolCall) -> Bound<'py, PyBytes> {
    PyBytes::new(py, &call.abi_encode())
}

/// `text` at most `limit` bytes, or an `InvalidInput` naming `what` (the registry would revert
/// `Operational scope too long`, `Currency too long` or `Category too long`).
fn at_most(text: &str, limit: usize, what: &str) -> PyResult<()> {
    if text.len() > limit {
        return Err(invalid(format!(
            "{what} is {} bytes; the registry stores at most {limit} (UTF-8 bytes, not characters)",
            text.len()
        )));
    }
    Ok(())
}

/// `registerAgent`'s fields, read from the keyword arguments both registration bindings share.
#[allow(clippy::too_many_arguments)]
fn registration(
    haftungsperson: &str,
    agent_wallet: &str,
    constitution_hash: &Bound<'_, PyAny>,
    capability_hash: &Bound<'_, PyAny>,
    operational_scope: String,
    parent_agent_id: u64,
    self_modifying: bool,
) -> PyResult<AgentRegistry::registerAgentCall> {
    at_most(&operational_scope, MAX_OPERATIONAL_SCOPE_BYTES, "operational scope")?;
    Ok(AgentRegistry::registerAgentCall {
        haftungsperson: parse_address(haftungsperson, "haftungsperson")?,
        agentWallet: parse_address(agent_wallet, "agent_wallet")?,
        constitutionHash: hash_of(constitution_hash, "constitution_hash")?,
        capabilityHash: hash_of(capability_hash, "capability_hash")?,
        operationalScope: operational_scope,
        parentAgentId: U256::from(parent_agent_id),
        selfModifying: self_modifying,
    })
}

/// Call data of `registerAgent(...)`: a self-registration (the sender is the agent wallet and,
/// for a root, the Haftungsperson).
#[pyfunction]
#[pyo3(signature = (
    *, haftungsperson, agent_wallet, constitution_hash, capability_hash, operational_scope, parent_agent_id=0,
    self_modifying=false,
))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn register_agent_calldata<'py>(
    py: Python<'py>,
    haftungsperson: &str,
    agent_wallet: &str,
    constitution_hash: &Bound<'py, PyAny>,
    capability_hash: &Bound<'py, PyAny>,
    operational_scope: String,
    parent_agent_id: u64,
    self_modifying: bool,
) -> PyResult<Bound<'py, PyBytes>> {
    let call = registration(
        haftungsperson,
        agent_wallet,
        constitution_hash,
        capability_hash,
        operational_scope,
        parent_agent_id,
        self_modifying,
    )?;
    Ok(encoded(py, &call))
}

/// Call data of `registerAgentWithConsent(...)`: `registerAgent`'s fields, the consents'
/// `deadline` and the two signatures (each `None` or empty when its party is the sender).
#[pyfunction]
#[pyo3(signature = (
    *, haftungsperson, agent_wallet, constitution_hash, capability_hash, operational_scope, deadline,
    parent_agent_id=0, self_modifying=false, wallet_consent=None, liability_consent=None,
))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn register_agent_with_consent_calldata<'py>(
    py: Python<'py>,
    haftungsperson: &str,
    agent_wallet: &str,
    constitution_hash: &Bound<'py, PyAny>,
    capability_hash: &Bound<'py, PyAny>,
    operational_scope: String,
    deadline: &Bound<'py, PyAny>,
    parent_agent_id: u64,
    self_modifying: bool,
    wallet_consent: Option<&Bound<'py, PyAny>>,
    liability_consent: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyBytes>> {
    let call = registration(
        haftungsperson,
        agent_wallet,
        constitution_hash,
        capability_hash,
        operational_scope,
        parent_agent_id,
        self_modifying,
    )?;
    let signature =
        |given: Option<&Bound<'py, PyAny>>, what: &str| match given.filter(|given| !given.is_none()) {
            Some(given) => bytes_of(given, what),
            None => Ok(Vec::new()),
        };
    let consents = ConsentSignatures {
        deadline: uint_of(deadline, "deadline")?,
        wallet_consent: signature(wallet_consent, "wallet_consent")?.into(),
        liability_consent: signature(liability_consent, "liability_consent")?.into(),
    };
    Ok(encoded(py, &consent::register_with_consent_call(call, consents)))
}

/// Call data of `attestCompliance(agentId)`.
#[pyfunction]
pub(crate) fn attest_compliance_calldata<'py>(
    py: Python<'py>,
    agent_id: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyBytes>> {
    Ok(encoded(py, &AgentRegistry::attestComplianceCall { agentId: uint_of(agent_id, "agent_id")? }))
}

/// Call data of `reportRevenue(...)`: `amount_cents` in cents, the period in Unix seconds.
#[pyfunction]
#[pyo3(signature = (*, agent_id, amount_cents, currency, category, period_start, period_end))]
pub(crate) fn report_revenue_calldata<'py>(
    py: Python<'py>,
    agent_id: &Bound<'py, PyAny>,
    amount_cents: &Bound<'py, PyAny>,
    currency: String,
    category: String,
    period_start: u64,
    period_end: u64,
) -> PyResult<Bound<'py, PyBytes>> {
    at_most(&currency, MAX_CURRENCY_BYTES, "currency")?;
    at_most(&category, MAX_CATEGORY_BYTES, "category")?;
    Ok(encoded(
        py,
        &AgentRegistry::reportRevenueCall {
            agentId: uint_of(agent_id, "agent_id")?,
            amount: uint_of(amount_cents, "amount_cents")?,
            currency,
            category,
            periodStart: period_start,
            periodEnd: period_end,
        },
    ))
}

/// Call data of `terminateSelf(agentId)`: permanent; the wallet is freed.
#[pyfunction]
pub(crate) fn terminate_self_calldata<'py>(
    py: Python<'py>,
    agent_id: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyBytes>> {
    Ok(encoded(py, &AgentRegistry::terminateSelfCall { agentId: uint_of(agent_id, "agent_id")? }))
}

/// Call data of `invalidateConsents()`: its sender takes back the consents it signed for its
/// current consent nonce (the nonce moves by one).
#[pyfunction]
pub(crate) fn invalidate_consents_calldata(py: Python<'_>) -> Bound<'_, PyBytes> {
    encoded(py, &AgentRegistry::invalidateConsentsCall {})
}

/// Call data of `invalidateConsentsThrough(nonce)`: its sender takes back every consent it
/// signed for any nonce up to and including `nonce` (its next nonce becomes `nonce + 1`; a
/// `nonce` below the current one reverts `Consent nonce already past`).
#[pyfunction]
pub(crate) fn invalidate_consents_through_calldata<'py>(
    py: Python<'py>,
    nonce: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyBytes>> {
    Ok(encoded(py, &AgentRegistry::invalidateConsentsThroughCall { nonce: uint_of(nonce, "nonce")? }))
}

/// Call data of the view `consentNonce(signer)`, for an `eth_call`: the nonce a signer's next
/// consent is signed at.
#[pyfunction]
pub(crate) fn consent_nonce_calldata<'py>(py: Python<'py>, signer: &str) -> PyResult<Bound<'py, PyBytes>> {
    Ok(encoded(py, &AgentRegistry::consentNonceCall(parse_address(signer, "signer")?)))
}

/// The nonce in `consentNonce`'s return data.
#[pyfunction]
pub(crate) fn decode_consent_nonce<'py>(
    py: Python<'py>,
    return_data: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let data = bytes_of(return_data, "return_data")?;
    let nonce = AgentRegistry::consentNonceCall::abi_decode_returns(&data)
        .map_err(|error| invalid(format!("consentNonce's return data does not decode: {error}")))?;
    int(py, nonce)
}

/// The gas a forward request gives the registry write `data` encodes (`request.gas`); an
/// `InvalidInput` with the relayer's words when `data` is not exactly one registry write.
#[pyfunction]
pub(crate) fn forward_gas(data: &Bound<'_, PyAny>) -> PyResult<u64> {
    gas::forward_gas(&bytes_of(data, "data")?).map_err(invalid)
}

/// The constitution hash of a constitution's text (32 bytes): `keccak256` of its UTF-8 bytes, as
/// given.
#[pyfunction]
pub(crate) fn constitution_hash<'py>(py: Python<'py>, text: &str) -> Bound<'py, PyBytes> {
    PyBytes::new(py, hashes::constitution_hash(text).as_slice())
}

/// The capability hash of capability names (32 bytes): trimmed, blanks dropped, sorted and
/// deduplicated, joined with `,`, `keccak256`.
#[pyfunction]
pub(crate) fn capability_hash<'py>(py: Python<'py>, names: Vec<String>) -> PyResult<Bound<'py, PyBytes>> {
    let hash: B256 = hashes::capability_hash(&names).map_err(invalid)?;
    Ok(PyBytes::new(py, hash.as_slice()))
}
