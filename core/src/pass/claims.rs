//! What a pass says: the issuer, the wallet (as a CAIP-10 account), the lifetime, the registry
//! and block it was read at, and the KYA standing there.

use alloy_primitives::{Address, B256};
use serde::{Deserialize, Serialize};

use crate::{Agent, AgentStatus, Compliance, StandingClock};

/// A pass's claims (INTERFACE.md section 7), as signed. Times are Unix seconds. A claim this
/// version does not know is ignored (RFC 7519 section 4: a later issuer may add one), unlike an
/// unknown header member ([`super::jws::Header`]), which could ask for processing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "browser", derive(tsify::Tsify))]
#[serde(rename_all = "camelCase")]
pub struct PassClaims {
    /// The API's origin (`PASS_ISSUER`).
    pub iss: String,
    /// `eip155:<chainId>:<checksummed wallet>`.
    pub sub: String,
    pub iat: u64,
    pub nbf: u64,
    pub exp: u64,
    pub jti: String,
    pub chain_id: u64,
    #[serde(serialize_with = "crate::api::checksum::serialize")]
    #[cfg_attr(feature = "browser", tsify(type = "string"))]
    pub registry: Address,
    pub block: PassBlock,
    pub kya: PassStanding,
}

/// The block a pass's standing was read at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "browser", derive(tsify::Tsify))]
pub struct PassBlock {
    pub number: u64,
    #[cfg_attr(feature = "browser", tsify(type = "string"))]
    pub hash: B256,
    pub time: u64,
}

/// The KYA standing of the pass's wallet at its block: nulls for a wallet without an agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "browser", derive(tsify::Tsify))]
#[serde(rename_all = "camelCase")]
pub struct PassStanding {
    pub is_registered: bool,
    pub is_compliant: bool,
    pub agent_id: Option<u64>,
    pub status: Option<AgentStatus>,
    #[serde(serialize_with = "serialize_optional_address")]
    #[cfg_attr(feature = "browser", tsify(type = "string | null"))]
    pub haftungsperson: Option<Address>,
    pub last_attestation: Option<u64>,
    /// The attestation's last current second: after it, the agent is not compliant.
    pub valid_until: Option<u64>,
}

impl PassStanding {
    /// The standing of a wallet whose agent (if any) the registry gave at a block judged by
    /// `clock`: compliance as `/kya/:wallet` computes it, and `validUntil` from the registry's
    /// grace period at that block.
    pub fn of(agent: Option<&Agent>, clock: StandingClock) -> Self {
        let Some(agent) = agent else {
            return Self {
                is_registered: false,
                is_compliant: false,
                agent_id: None,
                status: None,
                haftungsperson: None,
                last_attestation: None,
                valid_until: None,
            };
        };
        Self {
            is_registered: true,
            is_compliant: Compliance::of(agent, 0, clock).is_compliant(),
            agent_id: Some(agent.agent_id),
            status: Some(agent.status),
            haftungsperson: Some(agent.haftungsperson),
            last_attestation: Some(agent.last_attestation),
            valid_until: Some(clock.valid_until(agent.last_attestation)),
        }
    }
}

/// What the issuer fills in besides the standing.
#[derive(Debug, Clone)]
pub struct Issue<'a> {
    pub issuer: &'a str,
    pub chain_id: u64,
    pub registry: Address,
    pub wallet: Address,
    pub block: PassBlock,
    /// The registry's `attestationGracePeriod()` at `block`: `validUntil`, and compliance.
    pub grace_period: u64,
    /// Wall-clock time of issue.
    pub now: u64,
    /// `PASS_TTL_SECS`, at most [`super::MAX_TTL_SECS`].
    pub ttl_secs: u64,
    /// A unique id (random, from the issuer's runtime).
    pub jti: String,
}

impl PassClaims {
    /// The claims of a pass for `issue.wallet`, whose agent is `agent` at `issue.block`.
    ///
    /// `exp` is `now + ttl`, and for a compliant agent never past the attestation's last current
    /// second: a pass does not outlive the standing it states.
    pub fn new(issue: Issue<'_>, agent: Option<&Agent>) -> Self {
        let kya = PassStanding::of(agent, StandingClock::new(issue.block.time, issue.grace_period));
        let mut exp = issue.now.saturating_add(issue.ttl_secs.min(super::MAX_TTL_SECS));
        if kya.is_compliant
            && let Some(valid_until) = kya.valid_until
        {
            exp = exp.min(valid_until);
        }
        Self {
            iss: issue.issuer.to_owned(),
            sub: subject(issue.chain_id, issue.wallet),
            iat: issue.now,
            nbf: issue.now,
            exp,
            jti: issue.jti,
            chain_id: issue.chain_id,
            registry: issue.registry,
            block: issue.block,
            kya,
        }
    }

    /// The wallet `sub` names, when `sub` is a CAIP-10 account of this pass's chain.
    pub fn wallet(&self) -> Option<Address> {
        let rest = self.sub.strip_prefix("eip155:")?;
        let (chain, address) = rest.split_once(':')?;
        if chain != self.chain_id.to_string() {
            return None;
        }
        address.parse().ok()
    }
}

/// The CAIP-10 account id of `wallet` on EVM chain `chain_id`, checksummed.
pub fn subject(chain_id: u64, wallet: Address) -> String {
    format!("eip155:{chain_id}:{}", wallet.to_checksum_buffer(None).as_str())
}

fn serialize_optional_address<S: serde::Serializer>(
    address: &Option<Address>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match address {
        Some(address) => crate::api::checksum::serialize(address, serializer),
        None => serializer.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DEFAULT_GRACE_PERIOD_SECS;
    use alloy_primitives::{address, b256};

    fn agent(status: AgentStatus, last_attestation: u64) -> Agent {
        Agent {
            haftungsperson: address!("0x70997970c51812dc3a010c7d01b50e0d17dc79c8"),
            agent_wallet: address!("0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266"),
            ..crate::test_support::sample_agent(7, status, last_attestation, 1_000)
        }
    }

    fn issue(now: u64, ttl_secs: u64, block_time: u64) -> Issue<'static> {
        Issue {
            issuer: "https://kya.example",
            chain_id: 84_532,
            registry: address!("0x5fbdb2315678afecb367f032d93f642f64180aa3"),
            wallet: address!("0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266"),
            block: PassBlock {
                number: 42,
                hash: b256!("0x1111111111111111111111111111111111111111111111111111111111111111"),
                time: block_time,
            },
            grace_period: DEFAULT_GRACE_PERIOD_SECS,
            now,
            ttl_secs,
            jti: "j".into(),
        }
    }

    #[test]
    fn a_compliant_agents_claims_name_its_wallet_block_and_standing() {
        let attested = 10_000;
        let claims = PassClaims::new(issue(20_000, 300, 19_990), Some(&agent(AgentStatus::Active, attested)));
        let json = serde_json::to_value(&claims).unwrap();
        assert_eq!(json["sub"], "eip155:84532:0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266");
        assert_eq!(json["registry"], "0x5FbDB2315678afecb367f032d93F642f64180aa3");
        assert_eq!(json["chainId"], 84_532);
        assert_eq!(
            (json["iat"].as_u64(), json["nbf"].as_u64(), json["exp"].as_u64()),
            (Some(20_000), Some(20_000), Some(20_300))
        );
        assert_eq!(json["block"]["number"], 42);
        assert_eq!(json["block"]["time"], 19_990);
        let kya = &json["kya"];
        assert_eq!(kya["isRegistered"], true);
        assert_eq!(kya["isCompliant"], true);
        assert_eq!(kya["agentId"], 7);
        assert_eq!(kya["status"], "Active");
        assert_eq!(kya["haftungsperson"], "0x70997970C51812dc3A010C7d01b50e0d17dc79C8");
        assert_eq!(kya["lastAttestation"], attested);
        assert_eq!(kya["validUntil"], attested + DEFAULT_GRACE_PERIOD_SECS);
        assert_eq!(claims.wallet(), Some(address!("0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266")));
        let back: PassClaims = serde_json::from_value(json).unwrap();
        assert_eq!(back, claims);
    }

    #[test]
    fn expiry_is_clamped_to_the_attestations_last_current_second_and_the_ttl_cap() {
        let attested = 10_000;
        let valid_until = attested + DEFAULT_GRACE_PERIOD_SECS;
        let now = valid_until - 100;
        let claims = PassClaims::new(issue(now, 300, now), Some(&agent(AgentStatus::Active, attested)));
        assert_eq!(claims.exp, valid_until);
        // A lapsed or suspended agent's pass states that: its expiry is the TTL's.
        let lapsed = PassClaims::new(
            issue(valid_until + 5, 300, valid_until + 1),
            Some(&agent(AgentStatus::Active, attested)),
        );
        assert!(!lapsed.kya.is_compliant);
        assert_eq!(lapsed.exp, valid_until + 305);
        // No setting stretches a pass past the cap.
        let long = PassClaims::new(issue(20_000, 86_400, 20_000), None);
        assert_eq!(long.exp, 20_000 + super::super::MAX_TTL_SECS);
    }

    #[test]
    fn validity_and_compliance_follow_the_registrys_grace_period() {
        // The owner shortened the grace to 120 s; the block is 300 s past the attestation.
        let attested = 10_000;
        let shortened = Issue { grace_period: 120, ..issue(attested + 300, 300, attested + 300) };
        let claims = PassClaims::new(shortened, Some(&agent(AgentStatus::Active, attested)));
        assert!(!claims.kya.is_compliant, "the chain says not compliant: so does the pass");
        assert_eq!(claims.kya.valid_until, Some(attested + 120));
        assert_eq!(claims.exp, attested + 600, "a lapsed standing's pass lives its TTL");
        // Within the shortened grace: compliant, and the pass ends with the grace.
        let within = Issue { grace_period: 120, ..issue(attested + 60, 300, attested + 60) };
        let claims = PassClaims::new(within, Some(&agent(AgentStatus::Active, attested)));
        assert!(claims.kya.is_compliant);
        assert_eq!((claims.kya.valid_until, claims.exp), (Some(attested + 120), attested + 120));
    }

    #[test]
    fn an_unregistered_wallets_standing_is_nulls() {
        let claims = PassClaims::new(issue(20_000, 300, 20_000), None);
        let kya = serde_json::to_value(&claims.kya).unwrap();
        assert_eq!(
            kya,
            serde_json::json!({
                "isRegistered": false, "isCompliant": false, "agentId": null, "status": null,
                "haftungsperson": null, "lastAttestation": null, "validUntil": null
            })
        );
    }

    #[test]
    fn a_subject_of_another_chain_names_no_wallet() {
        let mut claims = PassClaims::new(issue(20_000, 300, 20_000), None);
        claims.sub = "eip155:1:0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266".into();
        assert_eq!(claims.wallet(), None);
        claims.sub = "eip155:84532:not-an-address".into();
        assert_eq!(claims.wallet(), None);
    }
}
