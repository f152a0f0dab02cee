//! The consents of INTERFACE.md section 5 on a real anvil: a wallet becomes an agent's wallet,
//! and an address a root's Haftungsperson, only when that party is the caller or signed its
//! EIP-712 consent (an EOA's key, or a contract wallet through ERC-1271) naming this creator, at
//! its current `consentNonce`, before the deadline. Every rule is shown twice: by a direct
//! transaction (`direct::`) and by a request its creator signs and the relayer account executes
//! through the forwarder (`forwarded::`, ERC-2771: the signer is the creator). Also the string
//! limits, the order of the checks and the registry's ERC-5267 domain.

use alloy::{
    primitives::{Address, B256, Bytes, U256},
    rpc::types::TransactionReceipt,
    signers::{SignerSync, local::PrivateKeySigner},
    sol_types::SolCall,
};
use kya_core::{
    AgentStatus,
    chain::abi::AgentRegistry,
    registry::consent::{self, AgentWalletConsent, Consent, ConsentSignatures, LiabilityConsent},
};
use kya_devchain::{TxError, dev_accounts};
use kya_tests::{
    TestChain,
    policy_wallet::{self, set_accepting},
    register_call,
};

use super::{
    agent, assert_revert, block_timestamp, id,
    paths::{Via, on_both_paths, send, send_data},
};

/// A fresh key of this file (no ETH): creators, wallets, Haftungspersons, contract wallets'
/// owners.
fn key(n: u64) -> PrivateKeySigner {
    dev_accounts::agent_wallet(4_000_000 + n)
}

/// A registration of `wallet` under `parent` (0: a root) naming `haftungsperson`, with
/// [`register_call`]'s hashes and scope, before its consents.
fn registration(wallet: Address, haftungsperson: Address, parent: u64) -> AgentRegistry::registerAgentCall {
    AgentRegistry::registerAgentCall { haftungsperson, ..register_call(wallet, parent) }
}

/// `registration` as `registerAgentWithConsent` carrying these signatures, valid until
/// `deadline`.
fn with_consents(
    registration: AgentRegistry::registerAgentCall,
    deadline: u64,
    wallet_consent: Bytes,
    liability_consent: Bytes,
) -> AgentRegistry::registerAgentWithConsentCall {
    let signatures = ConsentSignatures { deadline: U256::from(deadline), wallet_consent, liability_consent };
    consent::register_with_consent_call(registration, signatures)
}

/// `registration` from `creator` with the consents of whichever of `signers` are its parties,
/// at their current nonces, valid until [`deadline`].
async fn consented(
    t: &TestChain,
    registration: AgentRegistry::registerAgentCall,
    creator: Address,
    signers: &[&PrivateKeySigner],
) -> AgentRegistry::registerAgentWithConsentCall {
    kya_devchain::consent::consented(&t.chain, (t.chain_id(), t.registry()), registration, creator, signers)
        .await
        .expect("the consent nonces read")
}

/// A deadline for the consents signed now: a day of this chain's time ahead.
async fn deadline(t: &TestChain) -> u64 {
    kya_devchain::consent::consent_deadline(&t.chain).await.expect("the latest block's time")
}

/// `call` from `creator` with the root's two consents, the wallet's and the Haftungsperson's,
/// each at its first nonce, valid until `deadline`.
fn both_signed(
    t: &TestChain,
    call: &AgentRegistry::registerAgentCall,
    creator: Address,
    [wallet, liable]: [&PrivateKeySigner; 2],
    deadline: u64,
) -> AgentRegistry::registerAgentWithConsentCall {
    let (wallet_address, liable_address) = (wallet.address(), liable.address());
    with_consents(
        call.clone(),
        deadline,
        sign(t, wallet, &wallet_consent(wallet_address, creator, 0, 0, deadline)),
        sign(t, liable, &liability_consent(liable_address, creator, wallet_address, 0, deadline)),
    )
}

/// `key`'s signature of `consent` in the registry's domain on this chain.
fn sign(t: &TestChain, key: &PrivateKeySigner, consent: &Consent) -> Bytes {
    let digest = consent.signing_digest(&consent::domain(t.chain_id(), t.registry()));
    Bytes::from(key.sign_hash_sync(&digest).expect("a local key signs").as_bytes().to_vec())
}

/// An `AgentWalletConsent` of `wallet` to `creator` registering it under `parent`.
fn wallet_consent(wallet: Address, creator: Address, parent: u64, nonce: u64, deadline: u64) -> Consent {
    Consent::AgentWallet(AgentWalletConsent {
        agentWallet: wallet,
        creator,
        parentAgentId: U256::from(parent),
        nonce: U256::from(nonce),
        deadline: U256::from(deadline),
    })
}

/// A `LiabilityConsent` of `haftungsperson` to `creator` registering a root for `wallet`.
fn liability_consent(
    haftungsperson: Address,
    creator: Address,
    wallet: Address,
    nonce: u64,
    deadline: u64,
) -> Consent {
    Consent::Liability(LiabilityConsent {
        haftungsperson,
        creator,
        agentWallet: wallet,
        nonce: U256::from(nonce),
        deadline: U256::from(deadline),
    })
}

async fn next_id(t: &TestChain) -> u64 {
    t.chain.view(t.registry(), &AgentRegistry::nextAgentIdCall {}).await.expect("nextAgentId").to()
}

async fn agent_of(t: &TestChain, wallet: Address) -> u64 {
    t.chain.view(t.registry(), &AgentRegistry::walletToAgentCall(wallet)).await.expect("walletToAgent").to()
}

/// The `AgentRegistered` event of a receipt.
fn registered(t: &TestChain, receipt: &TransactionReceipt) -> AgentRegistry::AgentRegistered {
    let events = t.registry_events::<AgentRegistry::AgentRegistered>(receipt);
    events.into_iter().next().expect("an AgentRegistered event")
}

/// Someone else's wallet, registered without its consent, is refused whichever function carries
/// it; nothing is written, and the wallet's holder registers it afterwards.
async fn a_squatted_wallet_is_refused_and_its_holder_still_registers_it(via: Via) {
    let t = TestChain::start().await;
    let deadline = deadline(&t).await;
    let (squatter, holder) = (key(1), key(10));
    let squats = [
        // The squatter as its own Haftungsperson, so only the wallet's consent is missing.
        registration(holder.address(), squatter.address(), 0).abi_encode(),
        with_consents(
            registration(holder.address(), squatter.address(), 0),
            deadline,
            Bytes::new(),
            Bytes::new(),
        )
        .abi_encode(),
        // Naming the holder as Haftungsperson too: the wallet's consent is asked for first.
        register_call(holder.address(), 0).abi_encode(),
        // As a child of the squatter's own agent, which it may register under.
        with_consents(
            registration(holder.address(), squatter.address(), 1),
            deadline,
            Bytes::new(),
            Bytes::new(),
        )
        .abi_encode(),
    ];
    let own = send(&t, via, &squatter, &register_call(squatter.address(), 0)).await.unwrap();
    assert_eq!(registered(&t, &own).agentId, id(1));
    for squat in squats {
        assert_revert(send_data(&t, via, &squatter, squat).await, "Agent wallet consent required");
    }
    assert_eq!((next_id(&t).await, agent_of(&t, holder.address()).await), (2, 0), "nothing was written");

    let receipt = send(&t, via, &holder, &register_call(holder.address(), 0)).await.unwrap();
    let record = agent(&t, 2).await;
    assert_eq!(
        (record.creator, record.agentWallet, record.haftungsperson),
        (holder.address(), holder.address(), holder.address())
    );
    assert_eq!(t.consents_used(&receipt), [], "a self-registration uses no consent");
    assert_eq!(t.consent_nonce(holder.address()).await, 0);
}

/// A root's Haftungsperson must consent: named by the wallet registering itself, or by a creator
/// who has the wallet's consent, without the Haftungsperson's signature, the registration is
/// refused; with it, it passes.
async fn a_haftungsperson_named_without_consent_is_refused(via: Via) {
    let t = TestChain::start().await;
    let deadline = deadline(&t).await;
    let (creator, wallet, liable) = (key(1), key(10), key(20));
    let by_itself = registration(wallet.address(), liable.address(), 0);
    assert_revert(send(&t, via, &wallet, &by_itself).await, "Haftungsperson consent required");
    let empty = with_consents(by_itself.clone(), deadline, Bytes::new(), Bytes::new());
    assert_revert(send(&t, via, &wallet, &empty).await, "Haftungsperson consent required");

    // The creator has the wallet's consent, not the Haftungsperson's.
    let by_creator = consented(&t, by_itself.clone(), creator.address(), &[&wallet]).await;
    assert!(!by_creator.walletConsent.is_empty() && by_creator.liabilityConsent.is_empty());
    assert_revert(send(&t, via, &creator, &by_creator).await, "Haftungsperson consent required");
    assert_eq!(t.consent_nonce(wallet.address()).await, 0, "the refusal used up no consent");
    assert_eq!(next_id(&t).await, 1);

    let both = consented(&t, by_itself, creator.address(), &[&wallet, &liable]).await;
    let receipt = send(&t, via, &creator, &both).await.unwrap();
    assert_eq!(t.consents_used(&receipt), [(wallet.address(), 0), (liable.address(), 0)]);
    let record = agent(&t, 1).await;
    assert_eq!((record.creator, record.haftungsperson), (creator.address(), liable.address()));
}

/// A consent counts until its deadline, judged by the block's time: after it, the wallet's and
/// the Haftungsperson's are refused; in the deadline's own second, accepted.
async fn an_expired_consent_is_refused(via: Via) {
    let t = TestChain::start().await;
    let (creator, wallet, liable) = (key(1), key(10), key(20));
    let call = registration(wallet.address(), liable.address(), 0);
    let signed_until = |deadline| both_signed(&t, &call, creator.address(), [&wallet, &liable], deadline);
    let now = block_timestamp(&t).await;
    assert_revert(send(&t, via, &creator, &signed_until(now - 1)).await, "Consent expired");
    // The wallet registering itself, so only the Haftungsperson's consent is read: expired too.
    let by_itself = with_consents(
        call.clone(),
        now - 1,
        Bytes::new(),
        sign(
            &t,
            &liable,
            &liability_consent(liable.address(), wallet.address(), wallet.address(), 0, now - 1),
        ),
    );
    assert_revert(send(&t, via, &wallet, &by_itself).await, "Consent expired");
    // The wallet's consent in time, the Haftungsperson's not: one deadline covers both, so the
    // liability consent, signed until an earlier one, is not a signature of this call's.
    let mut mixed = signed_until(now - 1);
    mixed.walletConsent = signed_until(now + 3_600).walletConsent;
    mixed.deadline = U256::from(now + 3_600);
    assert_revert(send(&t, via, &creator, &mixed).await, "Invalid consent signature");
    assert_eq!(next_id(&t).await, 1);

    let deadline = now + 1_000;
    t.chain.set_next_timestamp(deadline).await.unwrap();
    let receipt = send(&t, via, &creator, &signed_until(deadline)).await.unwrap();
    assert_eq!(agent(&t, 1).await.registeredAt, deadline, "registered in the deadline's second");
    assert_eq!(t.consents_used(&receipt), [(wallet.address(), 0), (liable.address(), 0)]);
}

/// A consent lives at most 7 days from the block that uses it: a deadline past
/// `MAX_CONSENT_LIFETIME` is refused, one exactly at it registers, each judged by the time of the
/// block the registration is mined in (and, forwarded, by its simulation at the latest block).
async fn a_consent_longer_than_seven_days_is_refused(via: Via) {
    let t = TestChain::start().await;
    let (creator, wallet, liable) = (key(1), key(10), key(20));
    let lifetime = consent::MAX_CONSENT_LIFETIME_SECS;
    let lifetime_on_chain =
        t.chain.view(t.registry(), &AgentRegistry::MAX_CONSENT_LIFETIMECall {}).await.unwrap();
    assert_eq!(lifetime_on_chain, U256::from(lifetime), "core names the registry's bound");
    assert_eq!(consent::latest_deadline(1_000), 1_000 + 7 * 86_400);
    let call = registration(wallet.address(), liable.address(), 0);
    let signed_until = |deadline| both_signed(&t, &call, creator.address(), [&wallet, &liable], deadline);
    let mined_at = block_timestamp(&t).await + 100;
    t.chain.set_next_timestamp(mined_at).await.unwrap();
    let too_far = signed_until(consent::latest_deadline(mined_at) + 1);
    assert_revert(send(&t, via, &creator, &too_far).await, "Consent deadline too far");
    assert_eq!(next_id(&t).await, 1);
    assert_eq!((t.consent_nonce(wallet.address()).await, t.consent_nonce(liable.address()).await), (0, 0));

    // Exactly 7 days from the latest block: the forwarded path's simulation reads that block, at
    // the bound; the block it is mined in is no earlier, so inside it.
    let latest = block_timestamp(&t).await;
    let receipt = send(&t, via, &creator, &signed_until(consent::latest_deadline(latest))).await.unwrap();
    assert!(agent(&t, 1).await.registeredAt >= latest);
    assert_eq!(t.consents_used(&receipt), [(wallet.address(), 0), (liable.address(), 0)]);
}

/// `invalidateConsents` takes back every consent its caller signed and nobody used: its nonce
/// moves by one, a `ConsentsInvalidated` event names the new one, and the consents signed
/// before are refused while the other party's nonce stays. Forwarded, the caller is the
/// request's signer, so a party with no ETH takes its consents back through the relayer.
async fn invalidated_consents_are_refused(via: Via) {
    let t = TestChain::start().await;
    let (creator, wallet, liable) = (key(1), key(10), key(20));
    let call = registration(wallet.address(), liable.address(), 0);
    let signed = consented(&t, call.clone(), creator.address(), &[&wallet, &liable]).await;

    let receipt = send(&t, via, &liable, &AgentRegistry::invalidateConsentsCall {}).await.unwrap();
    assert_eq!(consents_invalidated(&t, &receipt), [(liable.address(), 1)]);
    assert_eq!((t.consent_nonce(wallet.address()).await, t.consent_nonce(liable.address()).await), (0, 1));
    assert_revert(send(&t, via, &creator, &signed).await, "Invalid consent signature");
    assert_eq!(next_id(&t).await, 1);

    // Twice is twice: each call voids whatever was signed at the nonce it moves past.
    let receipt = send(&t, via, &liable, &AgentRegistry::invalidateConsentsCall {}).await.unwrap();
    assert_eq!(consents_invalidated(&t, &receipt), [(liable.address(), 2)]);
    let fresh = consented(&t, call, creator.address(), &[&wallet, &liable]).await;
    let receipt = send(&t, via, &creator, &fresh).await.unwrap();
    assert_eq!(t.consents_used(&receipt), [(wallet.address(), 0), (liable.address(), 2)]);
    assert_eq!(agent_of(&t, wallet.address()).await, 1);
}

/// `wallet` registering itself as a root, naming `liable` its Haftungsperson with `liable`'s
/// consent signed for `nonce` (so only the Haftungsperson's consent is read).
fn liability_signed_for(
    t: &TestChain,
    wallet: &PrivateKeySigner,
    liable: &PrivateKeySigner,
    nonce: u64,
    deadline: u64,
) -> AgentRegistry::registerAgentWithConsentCall {
    let (wallet, liable_address) = (wallet.address(), liable.address());
    let consent = liability_consent(liable_address, wallet, wallet, nonce, deadline);
    with_consents(registration(wallet, liable_address, 0), deadline, Bytes::new(), sign(t, liable, &consent))
}

/// The gap `invalidateConsentsThrough` closes: a consent signed ahead, for the next nonce,
/// survives `invalidateConsents`, which moves the nonce by one onto it and so makes it valid.
async fn a_consent_signed_ahead_survives_invalidate_consents(via: Via) {
    let t = TestChain::start().await;
    let deadline = deadline(&t).await;
    let (liable, current, ahead) = (key(20), key(10), key(11));
    let at_current = liability_signed_for(&t, &current, &liable, 0, deadline);
    let signed_ahead = liability_signed_for(&t, &ahead, &liable, 1, deadline);
    assert_revert(send(&t, via, &ahead, &signed_ahead).await, "Invalid consent signature");

    let receipt = send(&t, via, &liable, &AgentRegistry::invalidateConsentsCall {}).await.unwrap();
    assert_eq!(consents_invalidated(&t, &receipt), [(liable.address(), 1)]);
    assert_revert(send(&t, via, &current, &at_current).await, "Invalid consent signature");
    let receipt = send(&t, via, &ahead, &signed_ahead).await.unwrap();
    assert_eq!(t.consents_used(&receipt), [(liable.address(), 1)], "the call meant to void it made it valid");
    assert_eq!(agent(&t, 1).await.haftungsperson, liable.address());
}

/// `invalidateConsentsThrough(n)` voids every consent its caller signed for a nonce up to and
/// including `n`, signed ahead or not: the nonce becomes `n + 1`, named by `ConsentsInvalidated`,
/// and a consent for `n + 1` stays good. A nonce below the current one reverts `Consent nonce
/// already past` (the nonce never moves back, so a used consent never comes back); the current
/// one moves it by one, as `invalidateConsents` does. Forwarded, the caller is the request's
/// signer (`_msgSender()`), not the account that sends the transaction.
async fn invalidating_through_a_nonce_voids_the_consents_signed_ahead(via: Via) {
    let t = TestChain::start().await;
    let deadline = deadline(&t).await;
    let liable = key(20);
    let wallets: Vec<PrivateKeySigner> = (10..14).map(key).collect();
    // Consents for nonces 0 (the current one), 1 and 2 (signed ahead), and 3, past the one voided.
    let signed: Vec<_> = (0..4)
        .map(|nonce| liability_signed_for(&t, &wallets[nonce], &liable, nonce as u64, deadline))
        .collect();

    let through = AgentRegistry::invalidateConsentsThroughCall { nonce: U256::from(2) };
    let receipt = send(&t, via, &liable, &through).await.unwrap();
    assert_eq!(consents_invalidated(&t, &receipt), [(liable.address(), 3)]);
    assert_eq!(t.consent_nonce(liable.address()).await, 3);
    if via == Via::Forwarder {
        let sender = dev_accounts::address(dev_accounts::Role::Relayer);
        assert_eq!(t.consent_nonce(sender).await, 0, "the transaction's sender took nothing back");
    }
    for (wallet, call) in wallets.iter().zip(&signed).take(3) {
        assert_revert(send(&t, via, wallet, call).await, "Invalid consent signature");
    }
    assert_eq!(next_id(&t).await, 1, "no voided consent registered anything");
    let receipt = send(&t, via, &wallets[3], &signed[3]).await.unwrap();
    assert_eq!(t.consents_used(&receipt), [(liable.address(), 3)], "the nonce after the one voided");
    assert_eq!(t.consent_nonce(liable.address()).await, 4);

    for past in [0, 3] {
        let back = AgentRegistry::invalidateConsentsThroughCall { nonce: U256::from(past) };
        assert_revert(send(&t, via, &liable, &back).await, "Consent nonce already past");
    }
    assert_eq!(t.consent_nonce(liable.address()).await, 4, "a refusal moves nothing");
    let current = AgentRegistry::invalidateConsentsThroughCall { nonce: U256::from(4) };
    let receipt = send(&t, via, &liable, &current).await.unwrap();
    assert_eq!(consents_invalidated(&t, &receipt), [(liable.address(), 5)], "the current nonce: one step");
    let far = AgentRegistry::invalidateConsentsThroughCall { nonce: U256::from(1_000_000) };
    let receipt = send(&t, via, &liable, &far).await.unwrap();
    assert_eq!(consents_invalidated(&t, &receipt), [(liable.address(), 1_000_001)]);
    assert_eq!(t.consent_nonce(liable.address()).await, 1_000_001);
}

/// The `ConsentsInvalidated` events of a receipt, as (signer, next nonce).
fn consents_invalidated(t: &TestChain, receipt: &TransactionReceipt) -> Vec<(Address, u64)> {
    let events = t.registry_events::<AgentRegistry::ConsentsInvalidated>(receipt);
    events.into_iter().map(|event| (event.signer, event.nextNonce.to())).collect()
}

/// Each consent serves one registration: it uses up its signer's nonce, once, with a
/// `ConsentUsed` event. The same signatures sent again for a second agent (the first one ended,
/// so its wallet is free) are refused, and so is the old liability consent beside a new wallet
/// consent.
async fn a_replayed_consent_is_refused(via: Via) {
    let t = TestChain::start().await;
    let (creator, wallet, liable) = (key(1), key(10), key(20));
    let call = registration(wallet.address(), liable.address(), 0);
    let first = consented(&t, call.clone(), creator.address(), &[&wallet, &liable]).await;
    let receipt = send(&t, via, &creator, &first).await.unwrap();
    assert_eq!(t.consents_used(&receipt), [(wallet.address(), 0), (liable.address(), 0)]);
    let event = registered(&t, &receipt);
    assert_eq!(
        (event.agentId, event.creator, event.agentWallet),
        (id(1), creator.address(), wallet.address())
    );
    assert_eq!(event.haftungsperson, liable.address());
    assert_eq!((t.consent_nonce(wallet.address()).await, t.consent_nonce(liable.address()).await), (1, 1));

    send(&t, via, &creator, &AgentRegistry::terminateSelfCall { agentId: id(1) }).await.unwrap();
    assert_eq!(agent_of(&t, wallet.address()).await, 0, "the wallet is free again");
    assert_revert(send(&t, via, &creator, &first).await, "Invalid consent signature");
    let fresh = consented(&t, call.clone(), creator.address(), &[&wallet, &liable]).await;
    let old_liability = AgentRegistry::registerAgentWithConsentCall {
        liabilityConsent: first.liabilityConsent.clone(),
        ..fresh.clone()
    };
    assert_revert(send(&t, via, &creator, &old_liability).await, "Invalid consent signature");
    assert_eq!(
        (t.consent_nonce(wallet.address()).await, t.consent_nonce(liable.address()).await, next_id(&t).await),
        (1, 1, 2),
        "the refusals used up nothing"
    );

    let receipt = send(&t, via, &creator, &fresh).await.unwrap();
    assert_eq!(t.consents_used(&receipt), [(wallet.address(), 1), (liable.address(), 1)]);
    assert_eq!((t.consent_nonce(wallet.address()).await, t.consent_nonce(liable.address()).await), (2, 2));
    assert_eq!(agent_of(&t, wallet.address()).await, 2);
}

/// A consent is to one creator, in one domain, by its party's key: signed naming creator A it
/// does not serve creator B, a signature by another key or for another chain is refused, and
/// the consents to creator A then serve creator A.
async fn a_consent_for_another_creator_or_by_another_key_is_refused(via: Via) {
    let t = TestChain::start().await;
    let (creator_a, creator_b, wallet, liable, stranger) = (key(1), key(2), key(10), key(20), key(99));
    let call = registration(wallet.address(), liable.address(), 0);
    let for_a = consented(&t, call.clone(), creator_a.address(), &[&wallet, &liable]).await;
    let for_b = consented(&t, call.clone(), creator_b.address(), &[&wallet, &liable]).await;
    // Each signature below names the calls' own deadline, so only what each attempt changes is wrong.
    let deadline: u64 = for_b.deadline.to();
    let wallet_for = |key: &PrivateKeySigner| {
        sign(&t, key, &wallet_consent(wallet.address(), creator_b.address(), 0, 0, deadline))
    };
    let liability_for = |key: &PrivateKeySigner| {
        sign(
            &t,
            key,
            &liability_consent(liable.address(), creator_b.address(), wallet.address(), 0, deadline),
        )
    };
    let on_chain_1 = {
        let digest = wallet_consent(wallet.address(), creator_b.address(), 0, 0, deadline)
            .signing_digest(&consent::domain(1, t.registry()));
        Bytes::from(wallet.sign_hash_sync(&digest).unwrap().as_bytes().to_vec())
    };
    let attempts = [
        ("both consents to creator A", for_a.clone()),
        (
            "the wallet's to B, the Haftungsperson's to A",
            AgentRegistry::registerAgentWithConsentCall {
                liabilityConsent: for_a.liabilityConsent.clone(),
                ..for_b.clone()
            },
        ),
        (
            "the wallet's consent signed by a stranger's key",
            AgentRegistry::registerAgentWithConsentCall {
                walletConsent: wallet_for(&stranger),
                ..for_b.clone()
            },
        ),
        (
            "the Haftungsperson's signed by the wallet's key",
            AgentRegistry::registerAgentWithConsentCall {
                liabilityConsent: liability_for(&wallet),
                ..for_b.clone()
            },
        ),
        (
            "the wallet's consent for chain 1",
            AgentRegistry::registerAgentWithConsentCall { walletConsent: on_chain_1, ..for_b.clone() },
        ),
        (
            "a signature that is not 65 bytes",
            AgentRegistry::registerAgentWithConsentCall {
                walletConsent: vec![1; 64].into(),
                ..for_b.clone()
            },
        ),
    ];
    for (what, attempt) in attempts {
        match send(&t, via, &creator_b, &attempt).await {
            Err(TxError::Reverted(reason)) => assert_eq!(reason, "Invalid consent signature", "{what}"),
            other => panic!("{what}: expected a refusal, got {other:?}"),
        }
    }
    assert_eq!((t.consent_nonce(wallet.address()).await, next_id(&t).await), (0, 1), "nothing was used");

    send(&t, via, &creator_a, &for_a).await.unwrap();
    assert_eq!(agent(&t, 1).await.creator, creator_a.address());
}

/// Third parties' consents by EOA keys: creator, wallet and Haftungsperson are three keys, and
/// the record names each in its place. One key that is both wallet and Haftungsperson signs two
/// consents, at consecutive nonces.
async fn an_eoas_consents_register_an_agent_of_three_parties(via: Via) {
    let t = TestChain::start().await;
    let (creator, wallet, liable) = (key(1), key(10), key(20));
    let call = consented(
        &t,
        registration(wallet.address(), liable.address(), 0),
        creator.address(),
        &[&wallet, &liable],
    )
    .await;
    let receipt = send(&t, via, &creator, &call).await.unwrap();
    let record = agent(&t, 1).await;
    assert_eq!(
        (record.creator, record.agentWallet, record.haftungsperson),
        (creator.address(), wallet.address(), liable.address())
    );
    assert_eq!((record.parentAgentId, record.generation), (U256::ZERO, U256::ZERO));
    assert_eq!(AgentStatus::try_from(record.status).unwrap(), AgentStatus::Active);
    assert_eq!(record.operationalScope, format!("agent {}", wallet.address()));
    let event = registered(&t, &receipt);
    assert_eq!(
        (event.agentId, event.creator, event.agentWallet, event.haftungsperson),
        (id(1), creator.address(), wallet.address(), liable.address())
    );
    assert_eq!(t.consents_used(&receipt), [(wallet.address(), 0), (liable.address(), 0)]);

    let both = key(11);
    let call = kya_tests::consented_register_call(&t, creator.address(), &both, 0).await;
    let receipt = send(&t, via, &creator, &call).await.unwrap();
    assert_eq!(t.consents_used(&receipt), [(both.address(), 0), (both.address(), 1)]);
    assert_eq!(t.consent_nonce(both.address()).await, 2);
    let record = agent(&t, 2).await;
    assert_eq!((record.agentWallet, record.haftungsperson), (both.address(), both.address()));
}

/// A contract wallet consents through ERC-1271: a `PolicyWallet` as agent wallet and another as
/// Haftungsperson, each consent signed by its owner's key, pass; once a wallet's owner switches
/// its acceptance off, a fresh consent of it is refused, and passes again when switched on.
async fn a_contract_wallets_consent_passes_through_erc1271_while_it_accepts(via: Via) {
    let t = TestChain::start().await;
    let deadline = deadline(&t).await;
    let (creator, wallet_owner, liable_owner) = (key(1), key(30), key(31));
    let wallet = policy_wallet::deploy(&t, wallet_owner.address()).await;
    let liable = policy_wallet::deploy(&t, liable_owner.address()).await;
    let call = |wallet_nonce: u64, liable_nonce: u64| {
        with_consents(
            registration(wallet, liable, 0),
            deadline,
            sign(&t, &wallet_owner, &wallet_consent(wallet, creator.address(), 0, wallet_nonce, deadline)),
            sign(
                &t,
                &liable_owner,
                &liability_consent(liable, creator.address(), wallet, liable_nonce, deadline),
            ),
        )
    };
    let receipt = send(&t, via, &creator, &call(0, 0)).await.unwrap();
    assert_eq!(t.consents_used(&receipt), [(wallet, 0), (liable, 0)]);
    let record = agent(&t, 1).await;
    assert_eq!(
        (record.creator, record.agentWallet, record.haftungsperson),
        (creator.address(), wallet, liable)
    );

    // The wallet's owner ends the agent and switches the wallet off: its fresh consent fails.
    send(&t, via, &creator, &AgentRegistry::terminateSelfCall { agentId: id(1) }).await.unwrap();
    set_accepting(&t, wallet, wallet_owner.address(), false).await;
    assert_revert(send(&t, via, &creator, &call(1, 1)).await, "Invalid consent signature");
    set_accepting(&t, wallet, wallet_owner.address(), true).await;
    send(&t, via, &creator, &call(1, 1)).await.unwrap();
    assert_eq!(agent_of(&t, wallet).await, 2);

    // The Haftungsperson's owner switches it off: its consent to a new agent fails.
    set_accepting(&t, liable, liable_owner.address(), false).await;
    let eoa = key(10);
    let mut next = consented(&t, registration(eoa.address(), liable, 0), creator.address(), &[&eoa]).await;
    // Signed for the deadline `consented` gave the call (a day from the latest block's time).
    let next_deadline = next.deadline.to();
    next.liabilityConsent = sign(
        &t,
        &liable_owner,
        &liability_consent(liable, creator.address(), eoa.address(), 2, next_deadline),
    );
    assert_revert(send(&t, via, &creator, &next).await, "Invalid consent signature");
    set_accepting(&t, liable, liable_owner.address(), true).await;
    send(&t, via, &creator, &next).await.unwrap();
    assert_eq!(agent(&t, 3).await.haftungsperson, liable);
}

/// A child needs its own wallet's consent, to this parent, and no liability consent: it inherits
/// its parent's Haftungsperson, whatever address the call names.
async fn a_child_needs_its_wallets_consent_and_no_liability_consent(via: Via) {
    let t = TestChain::start().await;
    let deadline = deadline(&t).await;
    let (creator, root_wallet, liable, child, named) = (key(1), key(10), key(20), key(11), key(21));
    let root = consented(
        &t,
        registration(root_wallet.address(), liable.address(), 0),
        creator.address(),
        &[&root_wallet, &liable],
    )
    .await;
    send(&t, via, &creator, &root).await.unwrap();

    let call = registration(child.address(), named.address(), 1);
    assert_revert(send(&t, via, &creator, &call).await, "Agent wallet consent required");
    // A consent to be a root is not a consent to be this child.
    let as_root = with_consents(
        call.clone(),
        deadline,
        sign(&t, &child, &wallet_consent(child.address(), creator.address(), 0, 0, deadline)),
        Bytes::new(),
    );
    assert_revert(send(&t, via, &creator, &as_root).await, "Invalid consent signature");

    let consented_child = consented(&t, call, creator.address(), &[&child]).await;
    assert!(consented_child.liabilityConsent.is_empty(), "no liability consent is signed");
    let receipt = send(&t, via, &creator, &consented_child).await.unwrap();
    assert_eq!(t.consents_used(&receipt), [(child.address(), 0)]);
    let record = agent(&t, 2).await;
    assert_eq!((record.creator, record.agentWallet), (creator.address(), child.address()));
    assert_eq!((record.parentAgentId, record.generation), (id(1), U256::from(1)));
    assert_eq!(record.haftungsperson, liable.address(), "inherited, not the one named");
    assert_eq!(t.consent_nonce(named.address()).await, 0);
}

/// A wallet registering itself (and, for a root, naming itself liable) needs no signature, by
/// `registerAgent` as before or by `registerAgentWithConsent` with both signatures empty; it
/// uses up no nonce. A signature it gives anyway is checked.
async fn self_registration_needs_no_signature(via: Via) {
    let t = TestChain::start().await;
    let deadline = deadline(&t).await;
    let (first, second, third) = (key(10), key(11), key(12));
    let receipt = send(&t, via, &first, &register_call(first.address(), 0)).await.unwrap();
    assert_eq!(t.consents_used(&receipt), []);
    let empty = with_consents(register_call(second.address(), 0), 0, Bytes::new(), Bytes::new());
    let receipt = send(&t, via, &second, &empty).await.unwrap();
    assert_eq!(
        t.consents_used(&receipt),
        [],
        "an empty signature with any deadline: the caller is the party"
    );
    for (agent_id, wallet) in [(1, &first), (2, &second)] {
        let record = agent(&t, agent_id).await;
        let wallet = wallet.address();
        assert_eq!((record.creator, record.agentWallet, record.haftungsperson), (wallet, wallet, wallet));
        assert_eq!(t.consent_nonce(wallet).await, 0);
    }

    let garbage =
        with_consents(register_call(third.address(), 0), deadline, vec![7; 65].into(), Bytes::new());
    assert_revert(send(&t, via, &third, &garbage).await, "Invalid consent signature");
    let signed = with_consents(
        register_call(third.address(), 0),
        deadline,
        sign(&t, &third, &wallet_consent(third.address(), third.address(), 0, 0, deadline)),
        Bytes::new(),
    );
    let receipt = send(&t, via, &third, &signed).await.unwrap();
    assert_eq!(t.consents_used(&receipt), [(third.address(), 0)], "a signature given is used");
}

/// `operationalScope` at most 1,024 bytes, `currency` 16 and `category` 64, counted in bytes
/// (a two-byte `é` counts twice); a revenue report's length is judged after who may report.
async fn over_long_strings_are_refused(via: Via) {
    let t = TestChain::start().await;
    let creator = key(1);
    let scope = |wallet: &PrivateKeySigner, scope: String| {
        let mut call = register_call(wallet.address(), 0);
        call.operationalScope = scope;
        call
    };
    let cases = [
        ("a".repeat(1_025), false),
        ("é".repeat(513), false),
        ("a".repeat(1_024), true),
        ("é".repeat(512), true),
    ];
    let mut agent_id = 0;
    for (n, (text, fits)) in (10..).zip(cases) {
        let wallet = key(n);
        let call = consented(&t, scope(&wallet, text.clone()), creator.address(), &[&wallet]).await;
        let result = send(&t, via, &creator, &call).await;
        if fits {
            result.unwrap_or_else(|error| panic!("{} bytes: {error:?}", text.len()));
            agent_id += 1;
            assert_eq!(agent(&t, agent_id).await.operationalScope, text);
        } else {
            assert_revert(result, "Operational scope too long");
        }
    }
    // Self-registration has the same limit.
    let own = key(20);
    assert_revert(send(&t, via, &own, &scope(&own, "x".repeat(1_025))).await, "Operational scope too long");
    assert_eq!(next_id(&t).await, 3, "two registrations fit");

    let report = |currency: String, category: String| AgentRegistry::reportRevenueCall {
        agentId: id(1),
        amount: U256::from(100),
        currency,
        category,
        periodStart: 1,
        periodEnd: 2,
    };
    let stranger = key(2);
    assert_revert(
        send(&t, via, &stranger, &report("C".repeat(17), "c".repeat(65))).await,
        "Not authorized for this agent",
    );
    let refused = [
        (report("C".repeat(17), "compute".into()), "Currency too long"),
        (report("€".repeat(6), "compute".into()), "Currency too long"),
        (report("USD".into(), "c".repeat(65)), "Category too long"),
        (report("USD".into(), "é".repeat(33)), "Category too long"),
        (report("C".repeat(17), "c".repeat(65)), "Currency too long"),
    ];
    for (call, reason) in refused {
        assert_revert(send(&t, via, &creator, &call).await, reason);
    }
    let fitting = [("C".repeat(16), "c".repeat(64)), ("€".repeat(5), "é".repeat(32))];
    for (currency, category) in &fitting {
        send(&t, via, &creator, &report(currency.clone(), category.clone())).await.unwrap();
    }
    let history =
        t.chain.view(t.registry(), &AgentRegistry::getRevenueHistoryCall { agentId: id(1) }).await.unwrap();
    let stored: Vec<_> =
        history.iter().map(|report| (report.currency.clone(), report.category.clone())).collect();
    assert_eq!(stored, fitting, "only the reports that fit");
}

/// The order of a registration's checks: the existing ones (ending with the wallet's binding)
/// before the scope's length, the length before the consents, the wallet's consent before the
/// Haftungsperson's.
async fn the_checks_run_in_order(via: Via) {
    let t = TestChain::start().await;
    let deadline = deadline(&t).await;
    let (creator, bound, revoked, wallet, liable) = (key(1), key(10), key(11), key(12), key(20));
    for taken in [&bound, &revoked] {
        send(&t, via, taken, &register_call(taken.address(), 0)).await.unwrap();
    }
    t.chain
        .send(t.deployment.regulator, t.registry(), &AgentRegistry::revokeAgentCall { agentId: id(2) })
        .await
        .unwrap();

    let long = |mut call: AgentRegistry::registerAgentCall| {
        call.operationalScope = "x".repeat(1_025);
        call
    };
    let now = block_timestamp(&t).await;
    let expired = sign(&t, &wallet, &wallet_consent(wallet.address(), creator.address(), 0, 0, now - 1));
    let valid = sign(&t, &wallet, &wallet_consent(wallet.address(), creator.address(), 0, 0, deadline));
    let cases = [
        (registration(Address::ZERO, creator.address(), 1).abi_encode(), "Agent wallet must not be zero"),
        // A stranger's parent, the wallet bound and the scope too long: the parent answers.
        (
            long(registration(bound.address(), creator.address(), 1)).abi_encode(),
            "Not authorized for this agent",
        ),
        // A squat of a bound or a revoked wallet, without consent and with an over-long scope.
        (
            long(registration(bound.address(), creator.address(), 0)).abi_encode(),
            "Wallet already registered to another agent",
        ),
        (
            long(registration(revoked.address(), liable.address(), 0)).abi_encode(),
            "Wallet already registered to another agent",
        ),
        (
            long(registration(wallet.address(), liable.address(), 0)).abi_encode(),
            "Operational scope too long",
        ),
        // Neither consent: the wallet's is asked for first.
        (registration(wallet.address(), liable.address(), 0).abi_encode(), "Agent wallet consent required"),
        (
            with_consents(
                registration(wallet.address(), liable.address(), 0),
                now - 1,
                expired,
                Bytes::new(),
            )
            .abi_encode(),
            "Consent expired",
        ),
        (
            with_consents(
                registration(wallet.address(), liable.address(), 0),
                deadline,
                vec![7; 65].into(),
                Bytes::new(),
            )
            .abi_encode(),
            "Invalid consent signature",
        ),
        (
            with_consents(registration(wallet.address(), liable.address(), 0), deadline, valid, Bytes::new())
                .abi_encode(),
            "Haftungsperson consent required",
        ),
    ];
    for (call, reason) in cases {
        assert_revert(send_data(&t, via, &creator, call).await, reason);
    }
    assert_eq!(next_id(&t).await, 3, "nothing was registered");
    assert_eq!(t.consent_nonce(wallet.address()).await, 0);
}

on_both_paths!(
    a_squatted_wallet_is_refused_and_its_holder_still_registers_it,
    a_haftungsperson_named_without_consent_is_refused,
    an_expired_consent_is_refused,
    a_consent_longer_than_seven_days_is_refused,
    invalidated_consents_are_refused,
    a_consent_signed_ahead_survives_invalidate_consents,
    invalidating_through_a_nonce_voids_the_consents_signed_ahead,
    a_replayed_consent_is_refused,
    a_consent_for_another_creator_or_by_another_key_is_refused,
    an_eoas_consents_register_an_agent_of_three_parties,
    a_contract_wallets_consent_passes_through_erc1271_while_it_accepts,
    a_child_needs_its_wallets_consent_and_no_liability_consent,
    self_registration_needs_no_signature,
    over_long_strings_are_refused,
    the_checks_run_in_order,
);

/// The registry publishes its consents' domain through ERC-5267, and it is the one
/// `kya_core::registry::consent` signs in (which every accepted consent above also shows).
#[tokio::test]
async fn the_registrys_eip712_domain_is_the_one_core_signs_in() {
    let t = TestChain::start().await;
    let domain = t.chain.view(t.registry(), &AgentRegistry::eip712DomainCall {}).await.unwrap();
    assert_eq!(domain.fields.0, [0x0f], "name, version, chainId and verifyingContract");
    assert_eq!((domain.name.as_str(), domain.version.as_str()), ("AgentRegistry", "1"));
    assert_eq!(
        (domain.name.as_str(), domain.version.as_str()),
        (consent::DOMAIN_NAME, consent::DOMAIN_VERSION)
    );
    assert_eq!(domain.chainId, U256::from(t.chain_id()));
    assert_eq!(domain.chainId, U256::from(t.chain.chain_id().await.unwrap()));
    assert_eq!(domain.verifyingContract, t.registry());
    assert_eq!((domain.salt, domain.extensions.len()), (B256::ZERO, 0));
    let ours = consent::domain(t.chain_id(), t.registry());
    let theirs = alloy::sol_types::eip712_domain! {
        name: domain.name,
        version: domain.version,
        chain_id: domain.chainId.to::<u64>(),
        verifying_contract: domain.verifyingContract,
    };
    assert_eq!(ours.separator(), theirs.separator());
}
