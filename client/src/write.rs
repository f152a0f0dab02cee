//! The registry writes an agent's side makes (register, attest, report revenue, terminate):
//! their calldata from `kya-core`'s `sol!` bindings, the gas a forward request gives them and a
//! registration's hashes (kya-core's rules, which the Python package uses too), and the
//! registry's string limits checked before anything is sent.

use alloy::{
    primitives::{Address, B256, Bytes, U256},
    sol_types::SolCall,
};
pub use kya_core::registry::{gas::GAS_PER_CONSENT, hashes::constitution_hash};
use kya_core::{
    chain::abi::AgentRegistry,
    registry::{
        consent::{
            self, ConsentSignatures, MAX_CATEGORY_BYTES, MAX_CURRENCY_BYTES, MAX_OPERATIONAL_SCOPE_BYTES,
            Parties,
        },
        gas::forward_gas,
        hashes,
    },
};
use serde::Serialize;

use crate::{Error, Result};

/// A registration's fields (`registerAgent`), and the consents it carries when its caller is
/// not both of its parties (`registerAgentWithConsent`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Registration {
    pub haftungsperson: Address,
    pub agent_wallet: Address,
    pub constitution_hash: B256,
    pub capability_hash: B256,
    pub operational_scope: String,
    /// 0: a root agent.
    pub parent_agent_id: u64,
    pub self_modifying: bool,
    /// `None`: sent as `registerAgent`, a self-registration (the caller is the agent wallet and,
    /// for a root, the Haftungsperson), the only registration the registry deployed on Base
    /// Sepolia knows. `Some`: sent as `registerAgentWithConsent` with these signatures (see
    /// [`crate::ConsentPlan`]).
    #[serde(skip)]
    pub consents: Option<ConsentSignatures>,
}

impl Registration {
    /// Its parties when `creator` registers it.
    pub fn parties(&self, creator: Address) -> Parties {
        Parties {
            creator,
            agent_wallet: self.agent_wallet,
            haftungsperson: self.haftungsperson,
            parent_agent_id: self.parent_agent_id,
        }
    }

    /// Whether `creator` may send it without consents: `creator` is the agent wallet and, for a
    /// root, the Haftungsperson.
    pub fn is_self_registration(&self, creator: Address) -> bool {
        let needed = self.parties(creator).consents_needed(U256::ZERO, U256::ZERO, U256::ZERO);
        needed.agent_wallet.is_none() && needed.liability.is_none()
    }

    /// `registerAgent` with its fields.
    pub fn call(&self) -> AgentRegistry::registerAgentCall {
        AgentRegistry::registerAgentCall {
            haftungsperson: self.haftungsperson,
            agentWallet: self.agent_wallet,
            constitutionHash: self.constitution_hash,
            capabilityHash: self.capability_hash,
            operationalScope: self.operational_scope.clone(),
            parentAgentId: U256::from(self.parent_agent_id),
            selfModifying: self.self_modifying,
        }
    }

    /// The registry calldata: `registerAgent`, or `registerAgentWithConsent` with the consents.
    pub fn calldata(&self) -> Bytes {
        match &self.consents {
            None => self.call().abi_encode(),
            Some(consents) => consent::register_with_consent_call(self.call(), consents.clone()).abi_encode(),
        }
        .into()
    }
}

/// A revenue report's fields (`reportRevenue`); `amount` in cents.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RevenueReport {
    pub agent_id: u64,
    pub amount_cents: U256,
    pub currency: String,
    pub category: String,
    pub period_start: u64,
    pub period_end: u64,
}

/// One write to the registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    Register(Registration),
    Attest {
        agent_id: u64,
    },
    ReportRevenue(RevenueReport),
    Terminate {
        agent_id: u64,
    },
    /// `invalidateConsents`: the signer takes back the consents it signed for its current consent
    /// nonce (the nonce moves by one, so a consent signed ahead for the next nonce becomes usable).
    InvalidateConsents,
    /// `invalidateConsentsThrough(nonce)`: the signer takes back every consent it signed for any
    /// nonce up to and including `nonce`, signed ahead or not; its consent nonce becomes
    /// `nonce + 1` (a `nonce` below the current one reverts `Consent nonce already past`).
    InvalidateConsentsThrough {
        nonce: U256,
    },
}

impl Write {
    /// The registry calldata.
    pub fn calldata(&self) -> Bytes {
        match self {
            Self::Register(registration) => return registration.calldata(),
            Self::Attest { agent_id } => {
                AgentRegistry::attestComplianceCall { agentId: U256::from(*agent_id) }.abi_encode()
            }
            Self::ReportRevenue(report) => AgentRegistry::reportRevenueCall {
                agentId: U256::from(report.agent_id),
                amount: report.amount_cents,
                currency: report.currency.clone(),
                category: report.category.clone(),
                periodStart: report.period_start,
                periodEnd: report.period_end,
            }
            .abi_encode(),
            Self::Terminate { agent_id } => {
                AgentRegistry::terminateSelfCall { agentId: U256::from(*agent_id) }.abi_encode()
            }
            Self::InvalidateConsents => AgentRegistry::invalidateConsentsCall {}.abi_encode(),
            Self::InvalidateConsentsThrough { nonce } => {
                AgentRegistry::invalidateConsentsThroughCall { nonce: *nonce }.abi_encode()
            }
        }
        .into()
    }

    /// Refuses, before anything is signed or sent, a string longer than the registry stores
    /// (INTERFACE.md section 5: it would revert `Operational scope too long`, `Currency too long`
    /// or `Category too long`).
    pub fn check(&self) -> Result<()> {
        match self {
            Self::Register(registration) => {
                at_most(&registration.operational_scope, MAX_OPERATIONAL_SCOPE_BYTES, "operational scope")
            }
            Self::ReportRevenue(report) => {
                at_most(&report.currency, MAX_CURRENCY_BYTES, "currency")?;
                at_most(&report.category, MAX_CATEGORY_BYTES, "category")
            }
            Self::Attest { .. }
            | Self::Terminate { .. }
            | Self::InvalidateConsents
            | Self::InvalidateConsentsThrough { .. } => Ok(()),
        }
    }

    /// Gas for the registry call inside the forwarder: kya-core's bound, read off the call data
    /// ([`forward_gas`]: fixed bounds well above what the calls use, plus 20k per 32 bytes of
    /// stored text, plus [`GAS_PER_CONSENT`] per consent signature), the one the Python package
    /// signs for too.
    pub fn gas(&self) -> u64 {
        forward_gas(&self.calldata()).expect("a write's own call data is exactly one registry write")
    }

    /// The command's name, for messages.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Register(_) => "register",
            Self::Attest { .. } => "attest",
            Self::ReportRevenue(_) => "report-revenue",
            Self::Terminate { .. } => "terminate",
            Self::InvalidateConsents | Self::InvalidateConsentsThrough { .. } => "invalidate-consents",
        }
    }
}

/// `text` at most `limit` bytes, or an error naming `what`.
fn at_most(text: &str, limit: usize, what: &str) -> Result<()> {
    if text.len() > limit {
        return Err(Error::Invalid(format!(
            "{what} is {} bytes; the registry stores at most {limit} (UTF-8 bytes, not characters)",
            text.len()
        )));
    }
    Ok(())
}

/// kya-core's capability hash of a list of capability names (the sorted set, trimmed, blanks
/// dropped), a list it refuses as [`Error::Invalid`].
pub fn capability_hash<S: AsRef<str>>(capabilities: &[S]) -> Result<B256> {
    hashes::capability_hash(capabilities).map_err(|refused| Error::Invalid(refused.to_string()))
}

/// Parses a money amount in currency units (`12.50`, `3`, `0.07`) into cents. Negative amounts,
/// more than two decimals and anything that is no plain decimal are refused with a message.
pub fn cents(amount: &str) -> Result<U256> {
    let text = amount.trim();
    let refused = |why: &str| Error::Invalid(format!("invalid amount {amount:?}: {why}"));
    if text.starts_with('-') {
        return Err(refused("must not be negative"));
    }
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    if whole.is_empty() && fraction.is_empty()
        || !whole.bytes().chain(fraction.bytes()).all(|byte| byte.is_ascii_digit())
    {
        return Err(refused("expected a decimal number such as 12.50"));
    }
    if fraction.len() > 2 {
        return Err(refused("at most two decimals (amounts are recorded in cents)"));
    }
    let digits = format!("{whole}{fraction:0<2}");
    U256::from_str_radix(if digits.is_empty() { "0" } else { &digits }, 10)
        .map_err(|_| refused("too large for a uint256"))
}

#[cfg(test)]
mod tests {
    use alloy::primitives::{address, b256, keccak256};
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn constitution_hash_is_keccak_of_the_text() {
        assert_eq!(
            constitution_hash(""),
            b256!("0xc5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470")
        );
        assert_eq!(constitution_hash("Be honest."), keccak256(b"Be honest."));
        assert_ne!(constitution_hash("Be honest."), constitution_hash("Be honest. "));
    }

    #[test]
    fn capability_hash_is_of_the_sorted_set() {
        let expected = keccak256(b"search,summarise");
        assert_eq!(capability_hash(&["search", "summarise"]).unwrap(), expected);
        assert_eq!(capability_hash(&[" summarise", "search ", "", "search"]).unwrap(), expected);
        assert_eq!(capability_hash(&["a"]).unwrap(), keccak256(b"a"));
        assert!(matches!(capability_hash::<&str>(&[]), Err(Error::Invalid(_))));
        assert!(matches!(capability_hash(&[" ", ""]), Err(Error::Invalid(_))));
    }

    #[test]
    fn amounts_are_cents() {
        assert_eq!(cents("12.50").unwrap(), U256::from(1250));
        assert_eq!(cents("12.5").unwrap(), U256::from(1250));
        assert_eq!(cents("3").unwrap(), U256::from(300));
        assert_eq!(cents("0.07").unwrap(), U256::from(7));
        assert_eq!(cents(".5").unwrap(), U256::from(50));
        for bad in ["-1", "-0.5", "1.234", "abc", "", ".", "1e3", "1,5", "+1"] {
            let error = cents(bad).unwrap_err().to_string();
            assert!(error.starts_with(&format!("invalid amount {bad:?}")), "{error}");
        }
        assert!(cents("-1").unwrap_err().to_string().contains("must not be negative"));
    }

    #[test]
    fn calldata_comes_from_the_bindings() {
        let write = Write::Attest { agent_id: 7 };
        assert_eq!(
            write.calldata(),
            Bytes::from(AgentRegistry::attestComplianceCall { agentId: U256::from(7) }.abi_encode())
        );
        let register = Write::Register(Registration {
            haftungsperson: address!("0x70997970C51812dc3A010C7d01b50e0d17dc79C8"),
            agent_wallet: address!("0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"),
            constitution_hash: constitution_hash("c"),
            capability_hash: capability_hash(&["x"]).unwrap(),
            operational_scope: "s".repeat(100),
            parent_agent_id: 0,
            self_modifying: false,
            consents: None,
        });
        let decoded = AgentRegistry::registerAgentCall::abi_decode(&register.calldata()).unwrap();
        assert_eq!(decoded.operationalScope.len(), 100);
        assert_eq!(register.gas(), 450_000 + 4 * 20_000);
        let through = Write::InvalidateConsentsThrough { nonce: U256::from(9) };
        let decoded = AgentRegistry::invalidateConsentsThroughCall::abi_decode(&through.calldata()).unwrap();
        assert_eq!(decoded.nonce, U256::from(9));
        assert_eq!(
            kya_core::registry::call::exact_write(&through.calldata()),
            Ok("invalidateConsentsThrough")
        );
    }

    #[test]
    fn strings_past_the_registrys_limits_are_refused_before_sending() {
        let registration = |scope: String| {
            Write::Register(Registration {
                haftungsperson: Address::ZERO,
                agent_wallet: Address::ZERO,
                constitution_hash: B256::ZERO,
                capability_hash: B256::ZERO,
                operational_scope: scope,
                parent_agent_id: 0,
                self_modifying: false,
                consents: None,
            })
        };
        assert!(registration("s".repeat(1024)).check().is_ok());
        assert_eq!(
            registration("s".repeat(1025)).check().unwrap_err().to_string(),
            "operational scope is 1025 bytes; the registry stores at most 1024 (UTF-8 bytes, not characters)"
        );
        // Bytes, not characters: 512 'ü' are 1,024 bytes, one more is too many.
        assert!(registration("ü".repeat(512)).check().is_ok());
        assert!(registration("ü".repeat(513)).check().is_err());
        let report = |currency: &str, category: &str| {
            Write::ReportRevenue(RevenueReport {
                agent_id: 1,
                amount_cents: U256::from(1),
                currency: currency.into(),
                category: category.into(),
                period_start: 0,
                period_end: 0,
            })
        };
        assert!(report(&"C".repeat(16), &"c".repeat(64)).check().is_ok());
        assert!(
            report(&"C".repeat(17), "compute")
                .check()
                .unwrap_err()
                .to_string()
                .starts_with("currency is 17 bytes")
        );
        assert!(
            report("USD", &"c".repeat(65))
                .check()
                .unwrap_err()
                .to_string()
                .starts_with("category is 65 bytes")
        );
    }

    proptest! {
        #[test]
        fn whole_and_fractional_cents_round_trip(whole in 0u64..1_000_000_000, fraction in 0u64..100) {
            let text = format!("{whole}.{fraction:02}");
            prop_assert_eq!(cents(&text).unwrap(), U256::from(whole * 100 + fraction));
        }

        #[test]
        fn capability_order_does_not_matter(mut names in proptest::collection::vec("[a-z]{1,8}", 1..6)) {
            let forward = capability_hash(&names).unwrap();
            names.reverse();
            prop_assert_eq!(capability_hash(&names).unwrap(), forward);
        }
    }
}
