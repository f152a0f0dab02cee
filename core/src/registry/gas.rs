//! The gas a forward request gives the registry write it carries (`request.gas`): the bound the
//! hosts without `kya-client` (the Python package) sign for, read off the call data itself.
//!
//! Fixed bounds well above what the calls use on our contracts (a registration about 250k with a
//! short scope), plus 20k per 32 bytes of stored text, plus [`GAS_PER_CONSENT`] for each consent
//! signature a registration carries: unused gas costs the payer nothing, too little fails the
//! call. The same figures as `kya-client`'s `Write::gas`.

use alloy_sol_types::SolInterface;

use super::call::{CallDataError, exact_write};
use crate::chain::abi::AgentRegistry::AgentRegistryCalls;

/// Gas a registration's bound grows by per consent signature it carries. Measured on anvil, two
/// ordinary keys' consents add 65k to a relayed registration (278k → 343k), about 30k each
/// (the digest, ecrecover, the nonce's first write, `ConsentUsed`). An ERC-1271 contract wallet
/// runs its own `isValidSignature` on top (a cold call, then its own checks: one ecrecover for a
/// single owner, one per owner for a multi-owner wallet), which the rest leaves room for.
pub const GAS_PER_CONSENT: u64 = 100_000;

/// A registration's bound before its scope and consents.
const REGISTRATION: u64 = 450_000;
/// A revenue report's bound before its strings.
const REVENUE_REPORT: u64 = 250_000;
/// Every other write: no text stored.
const PLAIN_WRITE: u64 = 150_000;
/// Gas per 32 bytes of stored text.
const PER_WORD: u64 = 20_000;

/// The gas to give the registry write `data` encodes; refused (as the relayer refuses it) when
/// `data` is not exactly one registry write.
pub fn forward_gas(data: &[u8]) -> Result<u64, CallDataError> {
    let function = exact_write(data)?;
    let call = AgentRegistryCalls::abi_decode(data)
        .map_err(|error| CallDataError::Malformed { function, detail: error.to_string() })?;
    let per_word = |text: &str| PER_WORD * (text.len() as u64).div_ceil(32);
    Ok(match call {
        AgentRegistryCalls::registerAgent(call) => REGISTRATION + per_word(&call.operationalScope),
        AgentRegistryCalls::registerAgentWithConsent(call) => {
            let signatures =
                u64::from(!call.walletConsent.is_empty()) + u64::from(!call.liabilityConsent.is_empty());
            REGISTRATION + per_word(&call.operationalScope) + GAS_PER_CONSENT * signatures
        }
        AgentRegistryCalls::reportRevenue(call) => {
            REVENUE_REPORT + per_word(&call.currency) + per_word(&call.category)
        }
        _ => PLAIN_WRITE,
    })
}

#[cfg(test)]
mod tests {
    use alloy_primitives::U256;
    use alloy_sol_types::SolCall;

    use super::*;
    use crate::chain::abi::AgentRegistry;

    use crate::test_support::registration_call as registration;

    #[test]
    fn text_and_consents_raise_the_bound() {
        assert_eq!(forward_gas(&registration(&"s".repeat(100)).abi_encode()), Ok(450_000 + 4 * 20_000));
        let consented = |wallet: usize, liability: usize| {
            crate::registry::consent::register_with_consent_call(
                registration("summarises papers"),
                crate::registry::consent::ConsentSignatures {
                    deadline: U256::from(9),
                    wallet_consent: vec![7; wallet].into(),
                    liability_consent: vec![8; liability].into(),
                },
            )
            .abi_encode()
        };
        assert_eq!(forward_gas(&consented(65, 65)), Ok(450_000 + 20_000 + 2 * GAS_PER_CONSENT));
        assert_eq!(forward_gas(&consented(65, 0)), Ok(450_000 + 20_000 + GAS_PER_CONSENT));
        let report = AgentRegistry::reportRevenueCall {
            agentId: U256::from(1),
            amount: U256::from(5),
            currency: "EUR".into(),
            category: "c".repeat(33),
            periodStart: 0,
            periodEnd: 0,
        };
        assert_eq!(forward_gas(&report.abi_encode()), Ok(250_000 + 20_000 + 2 * 20_000));
        for plain in [
            AgentRegistry::attestComplianceCall { agentId: U256::from(1) }.abi_encode(),
            AgentRegistry::terminateSelfCall { agentId: U256::from(1) }.abi_encode(),
            AgentRegistry::invalidateConsentsCall {}.abi_encode(),
            AgentRegistry::invalidateConsentsThroughCall { nonce: U256::from(3) }.abi_encode(),
        ] {
            assert_eq!(forward_gas(&plain), Ok(150_000));
        }
    }

    #[test]
    fn what_the_relayer_refuses_has_no_bound() {
        let view = AgentRegistry::getAgentCall { agentId: U256::from(1) }.abi_encode();
        assert_eq!(forward_gas(&view), Err(CallDataError::View("getAgent")));
        let mut padded = registration("x").abi_encode();
        padded.push(0);
        assert!(matches!(forward_gas(&padded), Err(CallDataError::Trailing { extra: 1, .. })));
    }
}
