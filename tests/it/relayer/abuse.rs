//! Attacks on the relayer's budget and limits, each tried as a stranger with free keys and many
//! addresses would (issue 19; the threat model in docs/relayer.md names the test of each):
//! padded call data, views, a deadline at the head block, a relay that reverts on inclusion
//! re-signed again and again, clients hiding behind a proxy or spread over an IPv6 /48, and the
//! most one signer, one IPv4 address and one IPv6 /48 can spend in a day.

use super::Engine;
use alloy::{
    primitives::{Bytes, U256, aliases::U48},
    signers::local::PrivateKeySigner,
    sol_types::SolCall,
};
use kya_core::chain::abi::AgentRegistry;
use kya_devchain::consent::{ConsentNonces, consent_deadline, sign_consents};
use kya_tests::{
    TestChain,
    relayer_fixture::{Client, body, forward, sign_with_core, wei},
};
use serde_json::{Value, json};

use super::{agent_key, anvil, balance, forwarder_nonce, register_call, start};

/// A registration of `agent` by itself, signed, with `nonce` and `deadline`.
pub(super) fn registration(t: &TestChain, agent: &PrivateKeySigner, nonce: u64, deadline: u64) -> Value {
    let mut request = forward(t, agent.address(), nonce, &register_call(agent.address(), 0));
    request.deadline = U48::from(deadline);
    body(&request, &sign_with_core(t, agent, &request).signature)
}

/// A request from `agent` carrying `data`, signed.
fn carrying(t: &TestChain, agent: &PrivateKeySigner, data: Vec<u8>) -> Value {
    let mut request = forward(t, agent.address(), 0, &register_call(agent.address(), 0));
    request.data = Bytes::from(data);
    body(&request, &sign_with_core(t, agent, &request).signature)
}

fn error_of(answer: &(u16, Value)) -> &str {
    answer.1["error"].as_str().unwrap_or_default()
}

async fn padded_call_data_views_and_unknown_functions_are_refused_before_anything_is_paid(engine: Engine) {
    let (t, _db, relayer) = start(engine, &[]).await;
    let client = &relayer.client;
    let agent = agent_key(900);
    let paying = relayer.relayer.address();
    let before = balance(&t, paying).await;

    // The attack: a valid registration and 30,000 junk bytes, which Solidity ignores.
    let mut padded = register_call(agent.address(), 0).abi_encode();
    padded.extend(std::iter::repeat_n(0x5a, 30_000));
    let answer = client.relay(&carrying(&t, &agent, padded)).await;
    assert_eq!(answer.0, 400, "{}", answer.1);
    assert_eq!(
        error_of(&answer),
        "request.data has 30000 bytes after the arguments of registerAgent; the relayer forwards exact calls only"
    );
    // Zero bytes are padding too.
    let mut zeros = register_call(agent.address(), 0).abi_encode();
    zeros.extend([0; 32]);
    let answer = client.relay(&carrying(&t, &agent, zeros)).await;
    assert_eq!(
        (answer.0, error_of(&answer)),
        (
            400,
            "request.data has 32 bytes after the arguments of registerAgent; the relayer forwards exact calls only"
        )
    );
    // A view costs gas and changes nothing.
    let view = AgentRegistry::getAgentCall { agentId: U256::from(1) }.abi_encode();
    let answer = client.relay(&carrying(&t, &agent, view)).await;
    assert_eq!(
        (answer.0, error_of(&answer)),
        (400, "request.data calls getAgent, a view of the registry: the relayer forwards only writes")
    );
    let answer = client.relay(&carrying(&t, &agent, vec![0xde, 0xad, 0xbe, 0xef, 0, 0])).await;
    assert_eq!(answer.0, 400);
    assert!(
        error_of(&answer).starts_with("request.data calls an unknown function (selector 0xdeadbeef)"),
        "{}",
        answer.1
    );
    // Cut short: the arguments do not decode.
    let short = register_call(agent.address(), 0).abi_encode()[..100].to_vec();
    let answer = client.relay(&carrying(&t, &agent, short)).await;
    assert_eq!(answer.0, 400);
    assert!(
        error_of(&answer).starts_with("request.data: the arguments of registerAgent do not decode"),
        "{}",
        answer.1
    );

    // None of it counted against the client or cost a wei; the exact call goes through.
    assert_eq!(balance(&t, paying).await, before);
    for _ in 0..20 {
        // Policy refusals come before the per-IP limit (20/hour): they use none of it.
        assert_eq!(client.relay(&carrying(&t, &agent, vec![1, 2, 3, 4])).await.0, 400);
    }
    let (status, relayed) = client.relay(&registration(&t, &agent, 0, 0)).await;
    assert_eq!(status, 200, "{relayed}");
    let (_, metrics) = client.metrics().await;
    assert!(metrics.contains("relayer_relays_rejected_total{reason=\"not_exact_call\"} 25\n"), "{metrics}");
    relayer.stop().await;
}

async fn a_deadline_without_room_is_refused_by_the_head_blocks_clock_not_the_wall_clock(engine: Engine) {
    let (t, _db, relayer) = start(engine, &[]).await;
    let client = &relayer.client;
    // The chain's clock runs a day ahead of the wall clock, as a long-lived local chain does.
    let wall = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    anvil(&t, "evm_setNextBlockTimestamp", json!([wall + 86_400])).await;
    anvil(&t, "evm_mine", json!([])).await;
    let head = t.chain.latest_timestamp().await.unwrap();

    // An hour ahead of the wall clock: already past by the chain's.
    let agent = agent_key(901);
    let answer = client.relay(&registration(&t, &agent, 0, wall + 3_600)).await;
    assert_eq!(answer.0, 400, "{}", answer.1);
    assert_eq!(
        error_of(&answer),
        format!(
            "request.deadline {} leaves 0 s after the chain's head time {head}; the relayer needs at least 120 s (or deadline 0: no expiry)",
            wall + 3_600
        )
    );
    // At the head, and a minute after it: less than the 120 s margin.
    for ahead in [0, 60, 119] {
        let answer = client.relay(&registration(&t, &agent, 0, head + ahead)).await;
        assert_eq!(answer.0, 400, "{}", answer.1);
        assert!(error_of(&answer).contains(&format!("leaves {ahead} s after")), "{}", answer.1);
    }
    // With the margin's room it is relayed and mined.
    let (status, relayed) = client.relay(&registration(&t, &agent, 0, head + 120)).await;
    assert_eq!(status, 200, "{relayed}");
    let relayed =
        client.relay_until(relayed["relayId"].as_str().unwrap(), |r| r["settledAt"].is_string()).await;
    assert_eq!(relayed["status"], "mined");
    relayer.stop().await;
}

/// A relayed `registerAgentWithConsent` whose consents expire within the margin: it would pass
/// the simulation at the head and revert on inclusion (`Consent expired`), at the relayer's
/// cost. Refused with 400 naming the consents' deadline, nothing paid, no consent nonce used, as
/// is one past the registry's 7 days (`Consent deadline too far`); the same registration with
/// the margin's room is mined.
async fn a_consent_expiring_within_the_margin_is_refused_at_no_cost(engine: Engine) {
    let (t, _db, relayer) = start(engine, &[]).await;
    let client = &relayer.client;
    let paying = relayer.relayer.address();
    let before = balance(&t, paying).await;
    let (creator, wallet) = (agent_key(905), agent_key(906));
    let head = t.chain.latest_timestamp().await.unwrap();
    let registration = |deadline: u64| {
        let call = sign_consents(
            register_call(wallet.address(), 0),
            creator.address(),
            (t.chain_id(), t.registry()),
            ConsentNonces::default(),
            &[&wallet],
            deadline,
        );
        assert!(!call.walletConsent.is_empty());
        // The forward request itself never expires: only the consents do.
        let request = forward(&t, creator.address(), 0, &call);
        body(&request, &sign_with_core(&t, &creator, &request).signature)
    };
    for ahead in [0, 60, 119] {
        let answer = client.relay(&registration(head + ahead)).await;
        assert_eq!(answer.0, 400, "{}", answer.1);
        assert_eq!(
            error_of(&answer),
            format!(
                "the consents' deadline {} (registerAgentWithConsent's deadline) leaves {ahead} s after the chain's head time {head}; the relayer needs at least 120 s",
                head + ahead
            )
        );
    }
    // Past the registry's 7 days the other way: it would revert `Consent deadline too far`.
    let too_far = kya_core::registry::consent::latest_deadline(head) + 3_600;
    let answer = client.relay(&registration(too_far)).await;
    assert_eq!(answer.0, 400, "{}", answer.1);
    assert_eq!(
        error_of(&answer),
        format!(
            "the consents' deadline {too_far} (registerAgentWithConsent's deadline) is past {}, 604800 s after the chain's head time {head}; the registry refuses a consent valid for longer (Consent deadline too far)",
            head + 604_800
        )
    );
    assert_eq!(balance(&t, paying).await, before, "nothing paid");
    assert_eq!(t.consent_nonce(wallet.address()).await, 0, "no consent used");
    let (status, relayed) = client.relay(&registration(head + 600)).await;
    assert_eq!(status, 200, "{relayed}");
    let relayed =
        client.relay_until(relayed["relayId"].as_str().unwrap(), |r| r["settledAt"].is_string()).await;
    assert_eq!(relayed["status"], "mined", "{relayed}");
    // A root's wallet is its own Haftungsperson here: both consents its, each using a nonce.
    assert_eq!(t.consent_nonce(wallet.address()).await, 2);
    let (_, metrics) = client.metrics().await;
    assert!(
        metrics.contains("relayer_relays_rejected_total{reason=\"consent_deadline_too_near\"} 3\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("relayer_relays_rejected_total{reason=\"consent_deadline_too_far\"} 1\n"),
        "{metrics}"
    );
    relayer.stop().await;
}

/// The second attack, with the margin turned off so that a request can still reach the
/// chain with a deadline at the head: on a chain with 2-second blocks it passes every check at
/// the head and reverts on inclusion, its forwarder nonce unspent, so it can be signed again and
/// again. Each is charged to its signer like any relay, and the signer's share stops it.
async fn a_relay_reverting_on_inclusion_is_charged_to_its_signer_until_its_share_is_spent(engine: Engine) {
    // A share of 0.0005 ETH: an attestation reserves about 80,000 gas at 3 gwei (0.00024 ETH),
    // and a reverted one costs about 34,000 gas at 2 gwei, so four or five get through.
    let (t, _db, relayer) = start(
        engine,
        &[
            ("DEADLINE_MARGIN_SECS", "0"),
            ("DAILY_GAS_BUDGET", "0.01"),
            ("SIGNER_BUDGET_SHARE_PERCENT", "5"),
            ("RATE_LIMIT_PER_SIGNER", "1000"),
            ("READ_RATE_LIMIT_PER_MINUTE", "100000"),
        ],
    )
    .await;
    let client = &relayer.client;
    let share = 10_000_000_000_000_000u128 * 5 / 100;
    // The attacker's agent, registered directly on chain by a funded creator.
    let attacker = agent_key(902);
    let creator = kya_devchain::dev_accounts::address(kya_devchain::dev_accounts::Role::CreatorA);
    let register = kya_tests::consented_register_call(&t, creator, &attacker, 0).await;
    t.chain.send(creator, t.registry(), &register).await.unwrap();
    let agent_id = super::agent_of(&t, attacker.address()).await;

    anvil(&t, "evm_setAutomine", json!([false])).await;
    anvil(&t, "evm_setIntervalMining", json!([2])).await;
    let (mut charged, mut raced) = (Vec::new(), 0);
    let refusal = loop {
        assert!(charged.len() < 30, "the share never stopped it: {charged:?}");
        // Empty blocks halve the base fee every five: held at 1 gwei, costs stay comparable.
        anvil(&t, "anvil_setNextBlockBaseFeePerGas", json!(["0x3b9aca00"])).await;
        let head = t.chain.latest_timestamp().await.unwrap();
        let mut request = forward(
            &t,
            attacker.address(),
            0,
            &AgentRegistry::attestComplianceCall { agentId: U256::from(agent_id) },
        );
        request.deadline = U48::from(head);
        let answer = client.relay(&body(&request, &sign_with_core(&t, &attacker, &request).signature)).await;
        // A block mined between reading the head and the relayer's own read of it moves the
        // head past this deadline: the request is refused before anything is charged. Signed
        // again against the new head (a few times at most: a block comes every 2 s).
        if answer.0 == 400 && error_of(&answer).contains("after the chain's head time") && raced < 5 {
            raced += 1;
            continue;
        }
        if answer.0 != 200 {
            break answer;
        }
        let id = answer.1["relayId"].as_str().unwrap().to_owned();
        let settled = client.relay_until(&id, |relay| relay["settledAt"].is_string()).await;
        assert_eq!(settled["status"], "reverted", "{settled}");
        let receipt = t.chain.receipt(settled["txHash"].as_str().unwrap().parse().unwrap()).await.unwrap();
        assert!(!receipt.status(), "it reverted on inclusion");
        let cost = super::cost(&receipt);
        assert_eq!(wei(&settled["costWei"]), cost, "charged what the chain charged");
        charged.push(cost);
    };
    assert_eq!(refusal.0, 429, "{}", refusal.1);
    assert_eq!(
        error_of(&refusal),
        "Signer's share of the daily gas budget exhausted (5%). Try again tomorrow."
    );
    assert!(charged.len() >= 2, "a few got through before the share ran out: {charged:?}");
    let spent: u128 = charged.iter().sum();
    assert!(spent <= share, "{spent} spent, share {share}");
    assert_eq!(forwarder_nonce(&t, attacker.address()).await, 0, "the request never ran");
    // Another signer is not held back by the attacker's share.
    let honest = agent_key(904);
    anvil(&t, "evm_setAutomine", json!([true])).await;
    let register = kya_tests::consented_register_call(&t, creator, &honest, 0).await;
    t.chain.send(creator, t.registry(), &register).await.unwrap();
    let honest_id = super::agent_of(&t, honest.address()).await;
    let head = t.chain.latest_timestamp().await.unwrap();
    let attest = AgentRegistry::attestComplianceCall { agentId: U256::from(honest_id) };
    let mut request = forward(&t, honest.address(), 0, &attest);
    request.deadline = U48::from(head + 3_600);
    let (status, answer) =
        client.relay(&body(&request, &sign_with_core(&t, &honest, &request).signature)).await;
    assert_eq!(status, 200, "{answer}");
    let settled =
        client.relay_until(answer["relayId"].as_str().unwrap(), |r| r["settledAt"].is_string()).await;
    assert_eq!(settled["status"], "mined");
    eprintln!("reverting relays charged before a 0.0005 ETH share ran out: {} ({spent} wei)", charged.len());
    relayer.stop().await;
}

/// Relays `count` forged requests (valid shape, a signature of someone else: a 401 after the
/// per-IP limit counted them) from behind a proxy that says `forwarded_for`; returns the statuses.
async fn forged_from(t: &TestChain, client: &Client, forwarded_for: &str, count: usize) -> Vec<u16> {
    let mut statuses = Vec::new();
    for n in 0..count {
        let agent = agent_key(950 + n as u64);
        let request = forward(t, agent.address(), 0, &register_call(agent.address(), 0));
        let forged = sign_with_core(t, &PrivateKeySigner::random(), &request).signature;
        statuses.push(client.relay_forwarded(&body(&request, &forged), forwarded_for).await.0);
    }
    statuses
}

async fn clients_behind_a_trusted_proxy_are_counted_apart_and_an_ipv6_48_as_one(engine: Engine) {
    let limited = [("RATE_LIMIT_PER_IP", "2"), ("TRUSTED_PROXIES", "127.0.0.1/32, 10.0.0.0/8")];
    let (t, _db, relayer) = start(engine, &limited).await;
    let client = &relayer.client;
    // Two clients behind the proxy: each has its own 2 an hour.
    assert_eq!(forged_from(&t, client, "203.0.113.1", 3).await, [401, 401, 429]);
    assert_eq!(forged_from(&t, client, "203.0.113.2", 2).await, [401, 401]);
    // A client cannot pose as another by writing the header itself: the proxy appends what it
    // saw, and the right-most untrusted hop counts (here through a second, inner proxy).
    assert_eq!(forged_from(&t, client, "203.0.113.2, 203.0.113.1, 10.1.2.3", 1).await, [429]);
    assert_eq!(forged_from(&t, client, "203.0.113.1, 203.0.113.3", 1).await, [401]);
    // IPv6: every /64 of one /48 is the same client; another /48 is another.
    assert_eq!(forged_from(&t, client, "2001:db8:1:1::1", 1).await, [401]);
    assert_eq!(forged_from(&t, client, "2001:db8:1:ffff::2", 2).await, [401, 429]);
    assert_eq!(forged_from(&t, client, "2001:db8:2::1", 1).await, [401]);
    relayer.stop().await;

    // Without TRUSTED_PROXIES the header is ignored: everyone is the TCP peer.
    let (t, _db, relayer) = start(engine, &limited[..1]).await;
    assert_eq!(forged_from(&t, &relayer.client, "203.0.113.1", 2).await, [401, 401]);
    assert_eq!(forged_from(&t, &relayer.client, "203.0.113.2", 1).await, [429]);
    relayer.stop().await;
}

/// What one attacker spent before the relayer stopped it, and what it was allowed.
struct Spent {
    who: &'static str,
    relays: usize,
    wei: u128,
    share: u128,
    refusal: String,
}

/// Registers fresh agents (signed by `signer_of(n)`, sent as from `client_of(n)`) until the
/// relayer refuses; returns what they cost. Each agent's wallet is a fresh key that consents to
/// the signer registering it; the signer is the Haftungsperson.
async fn drain(
    t: &TestChain,
    client: &Client,
    who: &'static str,
    share: u128,
    signer_of: impl Fn(u64) -> (PrivateKeySigner, u64),
    client_of: impl Fn(u64) -> String,
) -> Spent {
    let mut costs = Vec::new();
    for n in 0..200 {
        let (signer, nonce) = signer_of(n);
        let wallet = PrivateKeySigner::from_bytes(&alloy::primitives::keccak256(format!("{who} {n}")))
            .expect("a hash is a key");
        let registration = AgentRegistry::registerAgentCall {
            haftungsperson: signer.address(),
            ..register_call(wallet.address(), 0)
        };
        let fresh = ConsentNonces::default();
        let deadline = consent_deadline(&t.chain).await.expect("the head's time");
        let chain = (t.chain_id(), t.registry());
        let call = sign_consents(registration, signer.address(), chain, fresh, &[&wallet], deadline);
        let request = forward(t, signer.address(), nonce, &call);
        let signed = body(&request, &sign_with_core(t, &signer, &request).signature);
        let (status, answer) = client.relay_forwarded(&signed, &client_of(n)).await;
        if status != 200 {
            return Spent {
                who,
                relays: costs.len(),
                wei: costs.iter().sum(),
                share,
                refusal: format!("{status} {}", answer["error"].as_str().unwrap_or_default()),
            };
        }
        let settled =
            client.relay_until(answer["relayId"].as_str().unwrap(), |r| r["settledAt"].is_string()).await;
        assert_eq!(settled["status"], "mined", "{settled}");
        costs.push(wei(&settled["costWei"]));
    }
    panic!("{who}: nothing stopped 200 relays");
}

/// The test report's figures (docs/abuse.md): with the default budget and shares, the most one
/// signer, one IPv4 address and one IPv6 /48 can spend in a day. The hourly limits are lifted, to
/// stand for the day's 24 windows (20 relays an hour per client, 10 per signer, would otherwise
/// stop each attacker first), and the relays come through a trusted proxy that names the client.
async fn one_signer_one_ipv4_address_and_one_ipv6_48_spend_at_most_their_share_of_the_day(engine: Engine) {
    let (t, _db, relayer) = start(
        engine,
        &[
            ("SIGNER_BUDGET_SHARE_PERCENT", "5"),
            ("CLIENT_BUDGET_SHARE_PERCENT", "10"),
            ("RATE_LIMIT_PER_IP", "100000"),
            ("RATE_LIMIT_PER_SIGNER", "100000"),
            ("READ_RATE_LIMIT_PER_MINUTE", "1000000"),
            ("TRUSTED_PROXIES", "127.0.0.1"),
        ],
    )
    .await;
    let client = &relayer.client;
    let budget = 50_000_000_000_000_000u128;
    let attacker = agent_key(960);
    let one_signer = drain(
        &t,
        client,
        "one signer",
        budget / 20,
        |n| (attacker.clone(), n),
        |n| format!("198.51.100.{}", n % 250),
    )
    .await;
    let one_ipv4 = drain(
        &t,
        client,
        "one IPv4 address",
        budget / 10,
        |n| (agent_key(1_000 + n), 0),
        |_| "203.0.113.66".into(),
    )
    .await;
    let one_48 = drain(
        &t,
        client,
        "one IPv6 /48",
        budget / 10,
        |n| (agent_key(2_000 + n), 0),
        |n| format!("2001:db8:66:{n:x}::1"),
    )
    .await;

    eprintln!("| attacker | relays mined | wei spent | share (wei) | spent / share | then |");
    eprintln!("|---|---|---|---|---|---|");
    for spent in [&one_signer, &one_ipv4, &one_48] {
        eprintln!(
            "| {} | {} | {} | {} | {:.1}% | {} |",
            spent.who,
            spent.relays,
            spent.wei,
            spent.share,
            spent.wei as f64 * 100.0 / spent.share as f64,
            spent.refusal
        );
        assert!(spent.wei <= spent.share, "{}: {} > {}", spent.who, spent.wei, spent.share);
        assert!(spent.relays >= 2, "{}: the share allows a few relays", spent.who);
    }
    assert_eq!(
        one_signer.refusal,
        "429 Signer's share of the daily gas budget exhausted (5%). Try again tomorrow."
    );
    for spent in [&one_ipv4, &one_48] {
        assert_eq!(
            spent.refusal,
            "429 Client's share of the daily gas budget exhausted (10%). Try again tomorrow."
        );
    }
    // Everyone else still relays: the day's budget is far from spent.
    let status = client.settled().await;
    let used = wei(&status["dailyGasBudget"]["usedWei"]);
    assert_eq!(used, one_signer.wei + one_ipv4.wei + one_48.wei, "the books are the three attackers' costs");
    assert!(used <= budget / 4, "{used}");
    relayer.stop().await;
}

super::on_both_stores!(
    padded_call_data_views_and_unknown_functions_are_refused_before_anything_is_paid,
    a_deadline_without_room_is_refused_by_the_head_blocks_clock_not_the_wall_clock,
    a_consent_expiring_within_the_margin_is_refused_at_no_cost,
    a_relay_reverting_on_inclusion_is_charged_to_its_signer_until_its_share_is_spent,
    clients_behind_a_trusted_proxy_are_counted_apart_and_an_ipv6_48_as_one,
    one_signer_one_ipv4_address_and_one_ipv6_48_spend_at_most_their_share_of_the_day,
);
