//! Which call data the relayer forwards: exactly the ABI encoding of one of the registry's
//! writes, and nothing else.
//!
//! Solidity ignores call data past a function's arguments, so a valid call followed by junk
//! still runs, and the relayer pays 16 gas for every junk byte (30,000 bytes of padding made a
//! registration cost 4.5 times its gas). A view costs gas and changes nothing. So the data must
//! decode as one of the writes below and encode back to the very same bytes: no trailing bytes,
//! no dirty padding, no offsets pointing elsewhere.

use alloy_primitives::hex;
use alloy_sol_types::{SolCall, SolInterface};

use crate::chain::abi::AgentRegistry::{self, AgentRegistryCalls};

/// Why call data is not a registry write the relayer forwards.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallDataError {
    /// Fewer than the four bytes of a selector.
    #[error("request.data is not a registry call: it is shorter than a 4-byte function selector")]
    NoSelector,
    /// A selector of no function the relayer forwards.
    #[error(
        "request.data calls an unknown function (selector {0}); the relayer forwards only the registry's writes: {WRITES}"
    )]
    UnknownFunction(String),
    /// A registry function that writes nothing.
    #[error("request.data calls {0}, a view of the registry: the relayer forwards only writes")]
    View(&'static str),
    /// The arguments do not decode.
    #[error("request.data: the arguments of {function} do not decode: {detail}")]
    Malformed {
        /// The function named by the selector.
        function: &'static str,
        /// What the decoder said.
        detail: String,
    },
    /// More bytes than the arguments' encoding.
    #[error(
        "request.data has {extra} bytes after the arguments of {function}; the relayer forwards exact calls only"
    )]
    Trailing {
        /// The function named by the selector.
        function: &'static str,
        /// How many bytes follow the encoding.
        extra: usize,
    },
    /// The arguments decode but are not in the standard encoding (dirty padding, offsets that
    /// point elsewhere, or fewer bytes than the encoding).
    #[error("request.data: the arguments of {0} are not in the standard ABI encoding")]
    NotCanonical(&'static str),
}

/// The registry writes the relayer forwards, for the refusal's message.
const WRITES: &str = "registerAgent, registerAgentWithConsent, invalidateConsents, \
    invalidateConsentsThrough, attestCompliance, reportRevenue, terminateSelf, suspendAgent, reactivateAgent, \
    revokeAgent, addRegulator, removeRegulator, setAttestationGracePeriod, setMaxGenerationDepth";

/// Checks that `data` is exactly the ABI encoding of one registry write; returns its name.
pub fn exact_write(data: &[u8]) -> Result<&'static str, CallDataError> {
    let Some(selector) = data.get(..4) else { return Err(CallDataError::NoSelector) };
    let selector: [u8; 4] = selector.try_into().expect("four bytes");
    let Some(function) = write_named(selector)? else {
        return Err(CallDataError::UnknownFunction(hex::encode_prefixed(selector)));
    };
    let call = AgentRegistryCalls::abi_decode(data)
        .map_err(|error| CallDataError::Malformed { function, detail: error.to_string() })?;
    let canonical = call.abi_encode();
    if canonical.len() < data.len() && data.starts_with(&canonical) {
        return Err(CallDataError::Trailing { function, extra: data.len() - canonical.len() });
    }
    if canonical != data {
        return Err(CallDataError::NotCanonical(function));
    }
    Ok(function)
}

/// The write `selector` names (`Ok(None)`: no registry function; `Err`: a view).
fn write_named(selector: [u8; 4]) -> Result<Option<&'static str>, CallDataError> {
    macro_rules! writes {
        ($($call:ident),* $(,)?) => {
            $(if selector == AgentRegistry::$call::SELECTOR {
                return Ok(Some(AgentRegistry::$call::SIGNATURE.split('(').next().unwrap_or_default()));
            })*
        };
    }
    writes!(
        registerAgentCall,
        registerAgentWithConsentCall,
        invalidateConsentsCall,
        invalidateConsentsThroughCall,
        attestComplianceCall,
        reportRevenueCall,
        terminateSelfCall,
        suspendAgentCall,
        reactivateAgentCall,
        revokeAgentCall,
        addRegulatorCall,
        removeRegulatorCall,
        setAttestationGracePeriodCall,
        setMaxGenerationDepthCall,
    );
    if AgentRegistryCalls::valid_selector(selector) {
        let name = AgentRegistryCalls::name_by_selector(selector).unwrap_or("a view");
        return Err(CallDataError::View(name));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use alloy_primitives::{Address, B256, U256};

    use super::*;

    fn registration(scope: &str) -> Vec<u8> {
        crate::test_support::registration_call(scope).abi_encode()
    }

    #[test]
    fn every_write_in_its_exact_encoding_passes() {
        assert_eq!(exact_write(&registration("summarises papers")), Ok("registerAgent"));
        let attest = AgentRegistry::attestComplianceCall { agentId: U256::from(7) }.abi_encode();
        assert_eq!(exact_write(&attest), Ok("attestCompliance"));
        let report = AgentRegistry::reportRevenueCall {
            agentId: U256::from(1),
            amount: U256::from(12_345),
            currency: "EUR".into(),
            category: "api".into(),
            periodStart: 1,
            periodEnd: 2,
        }
        .abi_encode();
        assert_eq!(exact_write(&report), Ok("reportRevenue"));
        let invalidate = AgentRegistry::invalidateConsentsCall {}.abi_encode();
        assert_eq!(exact_write(&invalidate), Ok("invalidateConsents"));
        let through = AgentRegistry::invalidateConsentsThroughCall { nonce: U256::from(5) }.abi_encode();
        assert_eq!(exact_write(&through), Ok("invalidateConsentsThrough"));
        let revoke = AgentRegistry::revokeAgentCall { agentId: U256::from(3) }.abi_encode();
        assert_eq!(exact_write(&revoke), Ok("revokeAgent"));
        let consented = AgentRegistry::registerAgentWithConsentCall {
            haftungsperson: Address::repeat_byte(1),
            agentWallet: Address::repeat_byte(2),
            constitutionHash: B256::repeat_byte(3),
            capabilityHash: B256::repeat_byte(4),
            operationalScope: "summarises papers".into(),
            parentAgentId: U256::ZERO,
            selfModifying: false,
            deadline: U256::from(1_900_000_000u64),
            walletConsent: vec![7; 65].into(),
            liabilityConsent: Default::default(),
        }
        .abi_encode();
        assert_eq!(exact_write(&consented), Ok("registerAgentWithConsent"));
        let mut padded = consented;
        padded.push(0);
        assert!(matches!(exact_write(&padded), Err(CallDataError::Trailing { extra: 1, .. })));
    }

    /// Every state-changing function of the compiled registry is forwarded, and named in the
    /// refusal's list; every view is refused as one. A write added to the contract and forgotten
    /// here fails this test rather than the relayer's users.
    #[test]
    fn the_forwarded_writes_are_exactly_the_registry_s_state_changing_functions() {
        let artifact: serde_json::Value =
            serde_json::from_str(include_str!("../../../contracts/artifacts/AgentRegistry.json")).unwrap();
        let mut state_changing = Vec::new();
        for function in artifact["abi"].as_array().unwrap().iter().filter(|item| item["type"] == "function") {
            let name = function["name"].as_str().unwrap();
            let inputs: Vec<&str> = function["inputs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|input| input["type"].as_str().unwrap())
                .collect();
            let signature = format!("{name}({})", inputs.join(","));
            let selector: [u8; 4] = alloy_primitives::keccak256(&signature)[..4].try_into().unwrap();
            if matches!(function["stateMutability"].as_str(), Some("view" | "pure")) {
                assert!(
                    matches!(write_named(selector), Err(CallDataError::View(view)) if view == name),
                    "{signature}"
                );
            } else {
                assert_eq!(write_named(selector), Ok(Some(name)), "{signature}");
                state_changing.push(name);
            }
        }
        let mut named: Vec<&str> = WRITES.split(',').map(str::trim).collect();
        named.sort_unstable();
        state_changing.sort_unstable();
        assert_eq!(named, state_changing);
    }

    #[test]
    fn padding_is_refused_with_its_length() {
        let mut padded = registration("x");
        padded.extend(std::iter::repeat_n(0xab, 30_000));
        assert_eq!(
            exact_write(&padded),
            Err(CallDataError::Trailing { function: "registerAgent", extra: 30_000 })
        );
        // Zero padding too: Solidity would ignore it just the same.
        let mut padded = AgentRegistry::attestComplianceCall { agentId: U256::from(7) }.abi_encode();
        padded.push(0);
        let error = exact_write(&padded).unwrap_err();
        assert_eq!(
            error.to_string(),
            "request.data has 1 bytes after the arguments of attestCompliance; the relayer forwards exact calls only"
        );
    }

    #[test]
    fn dirty_or_short_encodings_are_refused() {
        // An address argument with bits above its 20 bytes.
        let mut dirty = registration("x");
        dirty[4] = 0xff;
        assert!(matches!(
            exact_write(&dirty),
            Err(CallDataError::NotCanonical("registerAgent") | CallDataError::Malformed { .. })
        ));
        // A bool that is 2.
        let mut two = registration("x");
        let bool_word = 4 + 6 * 32 + 31;
        two[bool_word] = 2;
        assert!(exact_write(&two).is_err());
        let attest = AgentRegistry::attestComplianceCall { agentId: U256::from(7) }.abi_encode();
        assert!(matches!(
            exact_write(&attest[..20]),
            Err(CallDataError::Malformed { function: "attestCompliance", .. })
        ));
    }

    #[test]
    fn views_unknown_selectors_and_stubs_are_named() {
        let view = AgentRegistry::getAgentCall { agentId: U256::from(1) }.abi_encode();
        assert_eq!(exact_write(&view), Err(CallDataError::View("getAgent")));
        assert_eq!(
            exact_write(&[0xde, 0xad, 0xbe, 0xef]).unwrap_err().to_string(),
            format!(
                "request.data calls an unknown function (selector 0xdeadbeef); the relayer forwards only the registry's writes: {WRITES}"
            )
        );
        assert_eq!(exact_write(&[0x12, 0x34]), Err(CallDataError::NoSelector));
        assert_eq!(exact_write(&[]), Err(CallDataError::NoSelector));
    }

    proptest::proptest! {
        /// Any registration passes exactly as encoded and fails with any byte appended.
        #[test]
        fn any_registration_passes_and_any_suffix_fails(
            scope in ".{0,300}",
            suffix in proptest::collection::vec(proptest::num::u8::ANY, 1..100),
        ) {
            let data = registration(&scope);
            proptest::prop_assert_eq!(exact_write(&data), Ok("registerAgent"));
            let mut padded = data.clone();
            padded.extend(&suffix);
            proptest::prop_assert!(exact_write(&padded).is_err());
        }
    }
}
