//! `kya register`: the registration from what was typed, then its parties' consents when the
//! signer is not both of them (INTERFACE.md section 5): signed here with their keys, passed in
//! as signatures made elsewhere, or, when neither, printed as the typed data their wallets sign,
//! with nothing sent. A self-registration is sent as plain `registerAgent`, as before consents.

use alloy::{
    primitives::{Address, Bytes, U256},
    signers::local::PrivateKeySigner,
};
use anyhow::{Result, anyhow, bail};
use kya_core::registry::consent::ConsentKind;

use super::{
    EXIT_CONSENT_NEEDED,
    args::{Consents, Register},
    missing_consents::{ConsentsNeeded, NeededConsent},
    render::{self, Style},
    settings::{self, Settings, address, agent_id},
    write_and_show,
};
use crate::{ConsentPlan, Recovered, Registration, Write, capability_hash, constitution_hash};

/// How long consents signed here stay valid: an hour past the chain's latest block.
const DEFAULT_CONSENT_LIFETIME: u64 = 3600;

/// The keys of the parties, when given to sign their consents here.
struct PartyKeys {
    wallet: Option<PrivateKeySigner>,
    haftungsperson: Option<PrivateKeySigner>,
}

pub(super) async fn run(settings: &Settings, style: Style, register: &Register) -> Result<i32> {
    let signer = settings::signer(&register.signing)?;
    let creator = signer.address();
    let keys = PartyKeys {
        wallet: settings::key(register.consent.wallet_key.as_deref(), "--wallet-key or AGENT_WALLET_KEY")?,
        haftungsperson: settings::key(
            register.consent.haftungsperson_key.as_deref(),
            "--haftungsperson-key or HAFTUNGSPERSON_KEY",
        )?,
    };
    let registration = registration(register, creator, &keys)?;
    Write::Register(registration.clone()).check()?;

    if registration.is_self_registration(creator) {
        // What the registry on Base Sepolia knows: no consent read, no RPC needed.
        for (given, flag) in [
            (&register.consent.wallet_consent, "--wallet-consent"),
            (&register.consent.liability_consent, "--liability-consent"),
        ] {
            if given.is_some() {
                bail!(
                    "{flag}: this registration needs no consent, its signer is the agent wallet and Haftungsperson"
                );
            }
        }
        let write = Write::Register(registration);
        return write_and_show(settings, style, &register.signing, signer, &write, None).await;
    }

    let registry = settings.write_registry(register.signing.direct).await?;
    let rpc = settings.rpc()?;
    let (chain_id, now, nonces) = tokio::try_join!(
        rpc.chain_id(),
        rpc.latest_timestamp(),
        rpc.consent_nonces(registry, &registration)
    )?;
    let deadline = deadline(&register.consent, now)?;
    let mut plan =
        ConsentPlan::new(&registration, creator, (chain_id, registry), nonces, U256::from(deadline));
    // Signatures given first: they win over keys, which sign only what is still missing.
    for (given, kind, flag) in [
        (&register.consent.wallet_consent, ConsentKind::AgentWalletConsent, "--wallet-consent"),
        (&register.consent.liability_consent, ConsentKind::LiabilityConsent, "--liability-consent"),
    ] {
        let Some(text) = given else { continue };
        let signature = signature(text, flag)?;
        let recovered = plan.attach(kind, signature.clone()).map_err(|error| anyhow!("{flag}: {error}"))?;
        if recovered != Recovered::Signer {
            let planned = plan.consents().find(|planned| planned.kind() == kind).expect("attached above");
            // Not an ordinary key's signature of this consent: only a contract wallet may still
            // accept it (ERC-1271), which the registry asks when the call runs.
            if !rpc.has_code(planned.signer()).await? {
                bail!(
                    "{flag} is not {}'s signature of this consent{}: it must sign exactly the typed data \
                     `kya register` prints without it (creator {creator}, nonce {}, deadline {deadline}, \
                     chain {chain_id}, registry {registry})",
                    planned.signer(),
                    match recovered {
                        Recovered::Other(other) => format!(" (it recovers to {other})"),
                        _ => " (not a 65-byte signature)".to_owned(),
                    },
                    planned.nonce(),
                );
            }
        }
    }
    for key in [&keys.wallet, &keys.haftungsperson].into_iter().flatten() {
        plan.sign_with(key)?;
    }

    if plan.missing().next().is_some() {
        show_missing(settings, &plan, creator, deadline)?;
        return Ok(EXIT_CONSENT_NEEDED);
    }
    let write = Write::Register(plan.apply(registration)?);
    write_and_show(settings, style, &register.signing, signer, &write, Some(registry)).await
}

/// The registration's fields from the command line. The agent wallet and Haftungsperson default
/// to the address of their key when one is given, else to the signer's.
fn registration(register: &Register, creator: Address, keys: &PartyKeys) -> Result<Registration> {
    let constitution_hash = match (&register.constitution_hash, &register.constitution_text) {
        (Some(hash), _) => settings::hash(hash, "constitution hash")?,
        (None, Some(text)) => constitution_hash(text),
        (None, None) => bail!("give --constitution-hash or --constitution-text"),
    };
    let capability_hash = match (&register.capability_hash, &register.capabilities) {
        (Some(hash), _) => settings::hash(hash, "capability hash")?,
        (None, Some(names)) => capability_hash(names)?,
        (None, None) => bail!("give --capability-hash or --capabilities"),
    };
    let parent = register.parent.trim();
    let parent_agent_id = if parent == "0" {
        0
    } else {
        agent_id(parent)
            .map_err(|_| anyhow!("invalid --parent {parent:?}: an agent id, or 0 for a root agent"))?
    };
    Ok(Registration {
        haftungsperson: party(
            register.haftungsperson.as_deref(),
            "haftungsperson",
            &keys.haftungsperson,
            creator,
        )?,
        agent_wallet: party(register.wallet.as_deref(), "wallet", &keys.wallet, creator)?,
        constitution_hash,
        capability_hash,
        operational_scope: register.scope.clone(),
        parent_agent_id,
        self_modifying: register.self_modifying,
        consents: None,
    })
}

/// `--wallet` or `--haftungsperson`: as given, else the address of its key, else the signer's;
/// a key that is not the given address's is refused.
fn party(
    given: Option<&str>,
    flag: &str,
    key: &Option<PrivateKeySigner>,
    creator: Address,
) -> Result<Address> {
    let key_address = key.as_ref().map(PrivateKeySigner::address);
    let Some(text) = given else { return Ok(key_address.unwrap_or(creator)) };
    let given = address(text, flag)?;
    if let Some(key_address) = key_address.filter(|key_address| *key_address != given) {
        bail!("--{flag}-key is the key of {key_address}, not of the --{flag} {given}");
    }
    Ok(given)
}

/// The consents' deadline: `--consent-deadline`, else an hour after the chain's `now`. Required
/// with a signature made elsewhere (it was signed for one deadline), not before `now` and at most
/// 7 days after it (the registry's `MAX_CONSENT_LIFETIME`).
fn deadline(consent: &Consents, now: u64) -> Result<u64> {
    let Some(text) = &consent.consent_deadline else {
        if consent.wallet_consent.is_some() || consent.liability_consent.is_some() {
            bail!(
                "a consent signature needs --consent-deadline: the deadline it was signed for (its typed data's \
                 message.deadline)"
            );
        }
        return Ok(now + DEFAULT_CONSENT_LIFETIME);
    };
    let deadline = settings::time(text, "--consent-deadline")?;
    if deadline < now {
        bail!(
            "--consent-deadline {deadline} ({}) is before the chain's latest block ({}): the registry would \
             refuse the consents ({})",
            kya_core::api::time::iso8601(deadline),
            kya_core::api::time::iso8601(now),
            kya_core::registry::reverts::CONSENT_EXPIRED
        );
    }
    let latest = kya_core::registry::consent::latest_deadline(now);
    if deadline > latest {
        bail!(
            "--consent-deadline {deadline} ({}) is more than 7 days after the chain's latest block ({}): the \
             registry would refuse the consents ({}); the latest it accepts now is {latest} ({})",
            kya_core::api::time::iso8601(deadline),
            kya_core::api::time::iso8601(now),
            kya_core::registry::reverts::CONSENT_DEADLINE_TOO_FAR,
            kya_core::api::time::iso8601(latest),
        );
    }
    Ok(deadline)
}

/// A consent signature as typed: `0x` and hex, 65 bytes for an ordinary key (a contract
/// wallet's may differ in length).
fn signature(text: &str, flag: &str) -> Result<Bytes> {
    let text = text.trim();
    let bytes = text
        .strip_prefix("0x")
        .filter(|hex| !hex.is_empty())
        .and_then(|hex| alloy::hex::decode(hex).ok())
        .ok_or_else(|| {
            anyhow!("invalid {flag}: expected 0x and hex digits (a 65-byte signature: 130 digits)")
        })?;
    Ok(bytes.into())
}

fn show_missing(settings: &Settings, plan: &ConsentPlan, creator: Address, deadline: u64) -> Result<()> {
    let needed = ConsentsNeeded {
        sent: false,
        chain_id: plan.chain_id,
        registry: plan.registry,
        creator,
        deadline,
        deadline_iso: kya_core::api::time::iso8601(deadline),
        consents: plan
            .missing()
            .map(|planned| {
                let (flag, key_flag) = match planned.kind() {
                    ConsentKind::AgentWalletConsent => ("--wallet-consent", "--wallet-key"),
                    ConsentKind::LiabilityConsent => ("--liability-consent", "--haftungsperson-key"),
                };
                NeededConsent {
                    consent: planned.kind(),
                    signer: planned.signer(),
                    flag,
                    key_flag,
                    digest: planned.digest,
                    typed_data: &planned.typed_data,
                }
            })
            .collect(),
    };
    if settings.json {
        println!("{}", serde_json::to_string_pretty(&needed)?);
    } else {
        println!("{}", render::consents_needed(&needed)?);
        eprintln!(
            "error: register needs {} before it can be sent; nothing was sent",
            if needed.consents.len() == 1 { "a consent" } else { "two consents" }
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn consents(deadline: Option<&str>, wallet_consent: Option<&str>) -> Consents {
        Consents {
            wallet_key: None,
            haftungsperson_key: None,
            wallet_consent: wallet_consent.map(Into::into),
            liability_consent: None,
            consent_deadline: deadline.map(Into::into),
        }
    }

    #[test]
    fn the_deadline_defaults_to_an_hour_of_chain_time_and_must_name_a_given_signatures() {
        assert_eq!(deadline(&consents(None, None), 1_700_000_000).unwrap(), 1_700_003_600);
        assert_eq!(
            deadline(&consents(Some("2023-11-14T23:00:00Z"), None), 1_700_000_000).unwrap(),
            1_700_002_800
        );
        let error = deadline(&consents(None, Some("0x12")), 1_700_000_000).unwrap_err().to_string();
        assert!(error.starts_with("a consent signature needs --consent-deadline"), "{error}");
        let error = deadline(&consents(Some("1699999999"), None), 1_700_000_000).unwrap_err().to_string();
        assert!(
            error.contains("before the chain's latest block")
                && error.contains(kya_core::registry::reverts::CONSENT_EXPIRED),
            "{error}"
        );
        // Exactly 7 days of chain time is the registry's bound, a second more is refused.
        assert_eq!(deadline(&consents(Some("1700604800"), None), 1_700_000_000).unwrap(), 1_700_604_800);
        let error = deadline(&consents(Some("1700604801"), None), 1_700_000_000).unwrap_err().to_string();
        assert_eq!(
            error,
            "--consent-deadline 1700604801 (2023-11-21T22:13:21.000Z) is more than 7 days after the chain's latest \
             block (2023-11-14T22:13:20.000Z): the registry would refuse the consents (Consent deadline too far); the \
             latest it accepts now is 1700604800 (2023-11-21T22:13:20.000Z)"
        );
    }

    #[test]
    fn signatures_are_hex() {
        assert_eq!(signature(&format!("0x{}", "ab".repeat(65)), "--wallet-consent").unwrap().len(), 65);
        for bad in ["", "0x", "ab", "0xzz", "0x123"] {
            let error = signature(bad, "--wallet-consent").unwrap_err().to_string();
            assert!(
                error.starts_with("invalid --wallet-consent: expected 0x and hex digits"),
                "{bad}: {error}"
            );
        }
    }

    #[test]
    fn a_partys_key_names_its_address_and_must_agree_with_a_given_one() {
        let creator = Address::repeat_byte(1);
        let key: PrivateKeySigner =
            "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d".parse().unwrap();
        assert_eq!(party(None, "wallet", &None, creator).unwrap(), creator);
        assert_eq!(party(None, "wallet", &Some(key.clone()), creator).unwrap(), key.address());
        let own = key.address().to_checksum(None);
        assert_eq!(party(Some(&own), "wallet", &Some(key.clone()), creator).unwrap(), key.address());
        let other = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC";
        let error = party(Some(other), "wallet", &Some(key.clone()), creator).unwrap_err().to_string();
        assert_eq!(
            error,
            format!("--wallet-key is the key of {}, not of the --wallet {other}", key.address())
        );
    }
}
