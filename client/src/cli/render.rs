//! How answers look: one JSON document with `--json`, otherwise short text, coloured only when
//! stdout is a terminal (and `NO_COLOR` is unset).
//!
//! Over 500 lines with its tests: the code is 483 lines (one renderer per kind of answer, side
//! by side so that they read alike), and its tests of the text each prints follow it.

use std::{fmt::Write as _, io::IsTerminal};

use alloy::primitives::U256;

use crate::{
    AgentDetails, AgentListItem, AgentStatus, Cents, DetailedStats, KyaDecision, KyaResult, LineageNode,
    Outcome, Page, RegistryResult, RelayView, RelayerStatus, Verdict,
};

/// Terminal styling, on or off.
#[derive(Clone, Copy)]
pub(crate) struct Style {
    colour: bool,
}

impl Style {
    pub(crate) fn detect() -> Self {
        Self { colour: std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none() }
    }

    fn paint(self, text: &str, code: &str) -> String {
        if self.colour { format!("\x1b[{code}m{text}\x1b[0m") } else { text.to_owned() }
    }

    fn good(self, text: &str) -> String {
        self.paint(text, "32")
    }

    fn warn(self, text: &str) -> String {
        self.paint(text, "33")
    }

    fn bad(self, text: &str) -> String {
        self.paint(text, "31")
    }

    fn dim(self, text: &str) -> String {
        self.paint(text, "2")
    }

    fn status(self, status: AgentStatus) -> String {
        match status {
            AgentStatus::Active => self.good(status.as_str()),
            AgentStatus::Suspended => self.warn(status.as_str()),
            AgentStatus::Revoked | AgentStatus::Terminated => self.bad(status.as_str()),
        }
    }
}

pub(crate) fn check(style: Style, check: &KyaResult) -> String {
    let decision = check.decision();
    let shown = match decision {
        KyaDecision::Provision => style.good(decision.as_str()),
        KyaDecision::RenewAttestation => style.warn(decision.as_str()),
        KyaDecision::DenyOrRegister => style.bad(decision.as_str()),
    };
    let mut out = format!("{shown}\n");
    match &check.agent {
        Some(agent) => {
            let _ = writeln!(out, "  wallet       {}", check.wallet);
            let _ = writeln!(out, "  agent        {} ({})", agent.agent_id, style.status(agent.status));
            let _ = writeln!(out, "  compliant    {}", if check.is_compliant { "yes" } else { "no" });
            let _ = writeln!(out, "  attested     {}", agent.last_attestation.as_deref().unwrap_or("never"));
            let _ = writeln!(out, "  scope        {}", agent.operational_scope);
        }
        None => {
            let _ = writeln!(out, "  wallet       {} is not registered", check.wallet);
        }
    }
    let _ = write!(out, "  checked at   {}", style.dim(&check.checked_at));
    out
}

/// A signed request's verdict: a refusal's reason and message; or the signer's decision first
/// (as `kya check` prints it), then the signature, then the signer's standing.
pub(crate) fn verdict(style: Style, verdict: &Verdict) -> String {
    let signed = match verdict {
        Verdict::Refused(refusal) => {
            return format!("{}\n  {}", style.bad(&format!("refused: {}", refusal.reason)), refusal.message);
        }
        Verdict::Verified(signed) => signed,
    };
    let standing = check(style, &signed.kya);
    let (decision, rows) = standing.split_once('\n').unwrap_or((&standing, ""));
    let mut out = format!("{decision}\n");
    let _ = writeln!(out, "  signature    verified: {}", signed.signature.keyid);
    let _ =
        writeln!(out, "  nonce        {}", signed.signature.nonce.as_deref().unwrap_or("none (replayable)"));
    let _ = writeln!(
        out,
        "  valid        {} to {}",
        kya_core::api::time::iso8601(signed.signature.created),
        kya_core::api::time::iso8601(signed.signature.expires)
    );
    let _ = writeln!(out, "  covers       {}", signed.signature.components.join(" "));
    out.push_str(rows);
    out
}

pub(crate) fn agent(style: Style, details: &AgentDetails) -> String {
    let agent = &details.agent;
    let compliance = &details.compliance;
    let verdict = if details.is_compliant() { style.good("compliant") } else { style.warn("not compliant") };
    let children = if details.children.is_empty() {
        "none".to_owned()
    } else {
        details.children.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
    };
    let rows = [
        ("status", format!("{} ({verdict})", style.status(agent.status))),
        ("wallet", agent.agent_wallet.to_string()),
        ("creator", agent.creator.to_string()),
        ("haftungsperson", agent.haftungsperson.to_string()),
        ("scope", agent.operational_scope.clone()),
        (
            "parent",
            if agent.parent_agent_id == 0 { "none (root)".into() } else { agent.parent_agent_id.to_string() },
        ),
        ("generation", agent.generation.to_string()),
        ("self-modifying", if agent.self_modifying { "yes" } else { "no" }.into()),
        ("constitution", agent.constitution_hash.to_string()),
        ("capabilities", agent.capability_hash.to_string()),
        ("registered", agent.registered_at.clone().unwrap_or_else(|| "-".into())),
        (
            "attested",
            format!(
                "{} ({} s ago{})",
                agent.last_attestation.as_deref().unwrap_or("never"),
                compliance.seconds_since_attestation,
                if compliance.attestation_current { "" } else { ", lapsed" }
            ),
        ),
        ("revenue report", agent.last_revenue_report.clone().unwrap_or_else(|| "never".into())),
        ("children", children),
    ];
    let mut out = format!("agent {}", agent.agent_id);
    for (name, value) in rows {
        let _ = write!(out, "\n  {name:<15} {value}");
    }
    out
}

/// The lineage as an indented tree, one agent a line.
pub(crate) fn lineage(style: Style, root: &LineageNode) -> String {
    let mut out = String::new();
    let _ = write!(out, "{}", node_line(style, root));
    tree(style, root, "", &mut out);
    out
}

fn node_line(style: Style, node: &LineageNode) -> String {
    format!(
        "{} {} {} gen {}",
        node.agent_id,
        style.status(node.status),
        style.dim(&node.wallet.to_string()),
        node.generation
    )
}

fn tree(style: Style, node: &LineageNode, prefix: &str, out: &mut String) {
    let hidden = match (node.truncated, node.total_children) {
        (Some(true), Some(total)) => total.saturating_sub(node.children.len() as u64),
        _ => 0,
    };
    let count = node.children.len();
    for (index, child) in node.children.iter().enumerate() {
        let last = index + 1 == count && hidden == 0;
        let _ = write!(out, "\n{prefix}{}{}", if last { "└── " } else { "├── " }, node_line(style, child));
        tree(style, child, &format!("{prefix}{}", if last { "    " } else { "│   " }), out);
    }
    if hidden > 0 {
        let _ = write!(
            out,
            "\n{prefix}└── {}",
            style.dim(&format!("… {hidden} more not shown (the API cut this family)"))
        );
    }
}

pub(crate) fn agents(style: Style, items: &[AgentListItem], footer: &str) -> String {
    let mut out = format!("{:>6}  {:<10}  {:<42}  {}", "id", "status", "creator", "registered");
    for item in items {
        // Pad before painting: escape codes would count as width.
        let status = format!("{:<10}", item.status.as_str());
        let status = status.replace(item.status.as_str(), &style.status(item.status));
        let _ = write!(
            out,
            "\n{:>6}  {status}  {:<42}  {}",
            item.agent_id,
            item.creator.to_string(),
            item.registered_at.as_deref().unwrap_or("-")
        );
    }
    let _ = write!(out, "\n{}", style.dim(footer));
    out
}

/// The footer of `kya agents --all`.
pub(crate) fn every_agent_footer(count: usize) -> String {
    counted(count, "agent")
}

/// The footer of one page of `kya agents`.
pub(crate) fn page_footer(page: &Page<AgentListItem>) -> String {
    format!(
        "page {} of {} ({}; --page N for another, --all for every page)",
        page.page,
        page.total_pages,
        counted(page.total, "agent")
    )
}

pub(crate) fn stats(stats: &DetailedStats) -> String {
    let mut out = format!(
        "{}, {} compliant ({}%)\n  registry     {}\n  chain        {}",
        counted(stats.stats.total_agents, "agent"),
        stats.compliant_count,
        stats.compliance_rate,
        stats.stats.registry_address,
        stats.stats.chain
    );
    let by_status: Vec<String> = AgentStatus::ALL
        .iter()
        .map(|&status| format!("{status} {}", stats.status_distribution.get(status)))
        .collect();
    let _ = write!(out, "\n  statuses     {}", by_status.join(", "));
    let by_generation: Vec<String> = stats
        .generation_distribution
        .iter()
        .map(|(generation, count)| format!("{generation}: {count}"))
        .collect();
    let _ = write!(out, "\n  generations  {}", by_generation.join(", "));
    let revenue: Vec<String> =
        stats.total_revenue.iter().map(|(currency, cents)| format!("{} {currency}", money(cents))).collect();
    let _ = write!(
        out,
        "\n  revenue      {}",
        if revenue.is_empty() { "none".into() } else { revenue.join(", ") }
    );
    out
}

/// Cents as currency units (`123456` → `1234.56`), exact at any size.
fn money(cents: &Cents) -> String {
    let hundred = U256::from(100);
    format!("{}.{:02}", cents.0 / hundred, (cents.0 % hundred).to::<u64>())
}

/// `1 agent`, `2 agents`: `noun` is singular and takes an `s`. Any integer (a `U256` too), so
/// decided on its digits.
fn counted(count: impl std::fmt::Display, noun: &str) -> String {
    let count = count.to_string();
    let plural = if count == "1" { "" } else { "s" };
    format!("{count} {noun}{plural}")
}

pub(crate) fn relayer_status(status: &RelayerStatus) -> String {
    let budget = &status.daily_gas_budget;
    format!(
        "relayer {}\n  balance      {} ETH\n  chain id     {}\n  gas budget   {} of {} wei used, {} left{}{}\n  registry     {}\n  forwarder    {}",
        status.relayer,
        status.balance,
        status.chain_id,
        budget.used_wei,
        budget.limit_wei,
        budget.remaining_wei,
        budget.resets_at.as_deref().map(|at| format!(" (resets {at})")).unwrap_or_default(),
        pacing(budget),
        status.contracts.registry,
        status.contracts.forwarder,
    ) + &lanes(status)
}

/// What pacing has opened of the budget, while a slice is still to come: a line of its own
/// (relayers before pacing, or in the last slice: nothing).
fn pacing(budget: &kya_core::api::relayer_view::GasBudget) -> String {
    match (&budget.open_wei, &budget.next_slice_at) {
        (Some(open), Some(next)) => format!("\n  open now     {open} wei, more at {next}"),
        _ => String::new(),
    }
}

/// One line per key of the pool: address, balance, open relays and the daemon sending on it.
fn lanes(status: &RelayerStatus) -> String {
    status
        .lanes
        .iter()
        .map(|lane| {
            let low = if lane.below_min_balance { ", below the minimum" } else { "" };
            format!(
                "\n  key          {}  {} ETH{low}, {} open, {}",
                lane.address,
                lane.balance,
                lane.depth,
                lane.holder
                    .as_ref()
                    .map_or_else(|| "held by no daemon".to_owned(), |holder| format!("held by {holder}"))
            )
        })
        .collect()
}

pub(crate) fn relay(style: Style, view: &RelayView) -> String {
    let status = if view.status.succeeded() {
        style.good(view.status.as_str())
    } else if view.status.is_final() {
        style.bad(view.status.as_str())
    } else {
        style.warn(view.status.as_str())
    };
    let mut out = format!(
        "relay {}\n  status       {status}\n  signer       {} (nonce {})",
        view.relay_id, view.from, view.nonce
    );
    let optional = [
        ("tx", view.tx_hash.map(|hash| hash.to_string())),
        ("block", view.block_number.map(|block| block.to_string())),
        ("gas used", view.gas_used.map(|gas| gas.to_string())),
        ("cost", view.cost_wei.as_ref().map(|wei| format!("{wei} wei"))),
        ("reason", view.revert_reason.clone().or(view.error.clone())),
        ("created", view.created_at.clone()),
        ("settled", view.settled_at.clone()),
    ];
    for (name, value) in optional {
        if let Some(value) = value {
            let _ = write!(out, "\n  {name:<12} {value}");
        }
    }
    // Every transaction sent for it, oldest first (a relayer without the list: the hashes).
    for tx in &view.transactions {
        let (fee, tip) = (gwei(tx.max_fee_per_gas), gwei(tx.max_priority_fee_per_gas));
        let _ = write!(
            out,
            "\n  sent         {:<6} {} at {}: max fee {fee} gwei, tip {tip} gwei",
            tx.kind, tx.tx_hash, tx.sent_at
        );
    }
    if view.transactions.is_empty() {
        for hash in &view.previous_tx_hashes {
            let _ = write!(out, "\n  replaced     {hash}");
        }
    }
    out
}

/// Wei per gas in gwei, every digit kept (fees on L2s are thousandths of a gwei): `2.57`, `0.001`.
fn gwei(wei: U256) -> String {
    let text = alloy::primitives::utils::format_units(wei, "gwei").unwrap_or_else(|_| format!("{wei}e-9"));
    if text.contains('.') { text.trim_end_matches('0').trim_end_matches('.').to_owned() } else { text }
}

pub(crate) fn outcome(style: Style, command: &str, outcome: &Outcome) -> String {
    let headline = match (&outcome.result, outcome.succeeded) {
        (Some(RegistryResult::Registered { agent_id, .. }), _) => {
            style.good(&format!("registered agent {agent_id}"))
        }
        (Some(RegistryResult::Attested { agent_id, .. }), _) => {
            style.good(&format!("attested agent {agent_id}"))
        }
        (Some(RegistryResult::RevenueReported { agent_id, amount, currency, .. }), _) => {
            let amount = counted(amount, "cent");
            style.good(&format!("reported {amount} {currency} for agent {agent_id}"))
        }
        (Some(RegistryResult::Terminated { agent_id }), _) => {
            style.good(&format!("terminated agent {agent_id}"))
        }
        (Some(RegistryResult::ConsentsInvalidated { signer, next_nonce }), _) => style.good(&format!(
            "took back every unused consent of {signer} for a nonce below {next_nonce}: its consent nonce is now {next_nonce}"
        )),
        (None, true) => style.good(&format!("{command}: done")),
        (None, false) => style.bad(&format!("{command}: {}", outcome.status)),
    };
    let mut out = headline;
    let rows = [
        ("via", Some(outcome.via.to_owned())),
        ("relay", outcome.relay_id.clone()),
        ("status", Some(outcome.status.clone())),
        ("tx", outcome.tx_hash.map(|hash| hash.to_string())),
        ("block", outcome.block_number.map(|block| block.to_string())),
        ("gas used", outcome.gas_used.map(|gas| gas.to_string())),
        ("cost", outcome.cost_wei.as_ref().map(|wei| format!("{wei} wei"))),
        ("reason", outcome.revert_reason.clone()),
    ];
    for (name, value) in rows {
        if let Some(value) = value {
            let _ = write!(out, "\n  {name:<10} {value}");
        }
    }
    out
}

/// A registration that lacks consents: for each, who signs, its digest and its typed data on one
/// line (to hand to a wallet's `eth_signTypedData_v4`), and how to pass the signature back.
pub(crate) fn consents_needed(
    needed: &super::missing_consents::ConsentsNeeded<'_>,
) -> serde_json::Result<String> {
    let mut out = format!(
        "register: nothing sent; {} missing",
        if needed.consents.len() == 1 { "a consent is" } else { "two consents are" }
    );
    for consent in &needed.consents {
        let (party, env) = match consent.consent {
            kya_core::registry::consent::ConsentKind::AgentWalletConsent => {
                ("agent wallet", "AGENT_WALLET_KEY")
            }
            kya_core::registry::consent::ConsentKind::LiabilityConsent => {
                ("Haftungsperson", "HAFTUNGSPERSON_KEY")
            }
        };
        let _ = write!(
            out,
            "\n\nThe {party} {} signs this {:?} (EIP-712, eth_signTypedData_v4); pass the signature back \
             with {} 0x…, or sign it here with {} / {env}.\n  digest  {}\n{}",
            consent.signer,
            consent.consent,
            consent.flag,
            consent.key_flag,
            consent.digest,
            serde_json::to_string(consent.typed_data)?,
        );
    }
    let one = needed.consents.len() == 1;
    let _ = write!(
        out,
        "\n\n{} the deadline {} ({}) and {} signer's current consent nonce: run the same command again \
         with --consent-deadline {} and the {}. A consent serves one registration by creator {} on chain \
         {} at registry {}.",
        if one { "It names" } else { "Both name" },
        needed.deadline,
        needed.deadline_iso,
        if one { "its" } else { "each" },
        needed.deadline,
        if one { "signature" } else { "signatures" },
        needed.creator,
        needed.chain_id,
        needed.registry
    );
    Ok(out)
}

/// A pass that verified: what it states and for how long.
pub(crate) fn pass(style: Style, pass: &kya_core::pass::VerifiedPass) -> String {
    let claims = &pass.claims;
    let standing = &claims.kya;
    let decision = KyaDecision::of(standing.is_registered, standing.is_compliant);
    let shown = match decision {
        KyaDecision::Provision => style.good(decision.as_str()),
        KyaDecision::RenewAttestation => style.warn(decision.as_str()),
        KyaDecision::DenyOrRegister => style.bad(decision.as_str()),
    };
    let mut out = format!("pass verified ({shown})\n");
    let _ = writeln!(out, "  wallet       {}", pass.wallet);
    if let (Some(agent_id), Some(status)) = (standing.agent_id, standing.status) {
        let _ = writeln!(out, "  agent        {agent_id} ({})", style.status(status));
    }
    let _ = writeln!(
        out,
        "  block        {} ({})",
        claims.block.number,
        kya_core::api::time::iso8601(claims.block.time)
    );
    let _ = writeln!(
        out,
        "  valid        {} to {}",
        kya_core::api::time::iso8601(claims.nbf),
        kya_core::api::time::iso8601(claims.exp)
    );
    let _ = write!(out, "  key          {}", style.dim(&pass.kid));
    out
}

/// A pass a provider would not accept, and why.
pub(crate) fn pass_refused(style: Style, refusal: &kya_core::pass::PassRefusal) -> String {
    format!("{}\n  {refusal}", style.bad(&format!("pass refused: {}", refusal.reason())))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAIN: Style = Style { colour: false };

    /// `/stats/detailed` of a registry of one agent, as the API writes it.
    fn one_agent_stats() -> DetailedStats {
        serde_json::from_str(concat!(
            r#"{"totalAgents":1,"registryAddress":"0x2EFaB5B3BEf49E56a6Ce1dcB1A39EF63C312EA23","#,
            r#""chain":"http://127.0.0.1:8545","#,
            r#""statusDistribution":{"Active":1,"Suspended":0,"Revoked":0,"Terminated":0},"#,
            r#""generationDistribution":{"0":1},"complianceRate":"100.0","compliantCount":1,"#,
            r#""totalRevenue":{"EUR":1,"USD":123456},"recentRegistrations":[]}"#,
        ))
        .expect("the API's shape")
    }

    #[test]
    fn the_relayer_status_lists_every_key() {
        let status: RelayerStatus = serde_json::from_str(concat!(
            r#"{"relayer":"0xa0Ee7A142d267C1f36714E4a8F75612F20a79720","balance":"1.5","balanceWei":"1500000000000000000","#,
            r#""chainId":84532,"dailyGasBudget":{"limitWei":"10","usedWei":"4","remainingWei":"6","pendingWei":"0","resetsAt":null},"#,
            r#""contracts":{"registry":"0x5FbDB2315678afecb367f032d93F642f64180aa3","forwarder":"0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512"},"#,
            r#""lanes":[{"address":"0xa0Ee7A142d267C1f36714E4a8F75612F20a79720","balance":"1.5","balanceWei":"1500000000000000000","#,
            r#""belowMinBalance":false,"depth":2,"holder":"eu-1"},"#,
            r#"{"address":"0x14dC79964da2C08b23698B3D3cc7Ca32193d9955","balance":"0.0005","balanceWei":"500000000000000","#,
            r#""belowMinBalance":true,"depth":0,"holder":"eu-1"}]}"#,
        ))
        .expect("the relayer's shape");
        let text = relayer_status(&status);
        assert!(!text.contains("open now"), "no pacing fields: {text}");
        assert!(
            text.ends_with(concat!(
                "\n  key          0xa0Ee7A142d267C1f36714E4a8F75612F20a79720  1.5 ETH, 2 open, held by eu-1",
                "\n  key          0x14dC79964da2C08b23698B3D3cc7Ca32193d9955  0.0005 ETH, below the minimum, 0 open, held by eu-1",
            )),
            "{text}"
        );
        // A paced relayer: what is open until the next slice.
        let mut paced = status.clone();
        paced.daily_gas_budget.open_wei = Some(U256::from(2));
        paced.daily_gas_budget.next_slice_at = Some("2026-05-01T13:00:00.000Z".into());
        assert!(
            relayer_status(&paced)
                .contains("6 left\n  open now     2 wei, more at 2026-05-01T13:00:00.000Z\n  registry"),
            "{}",
            relayer_status(&paced)
        );
        // A relayer before the key pool sends no lanes: read as none.
        let mut older = serde_json::to_value(&status).unwrap();
        older.as_object_mut().unwrap().remove("lanes");
        let older: RelayerStatus = serde_json::from_value(older).unwrap();
        assert!(older.lanes.is_empty() && !relayer_status(&older).contains("key "));
    }

    #[test]
    fn counts_of_one_are_singular() {
        assert_eq!(counted(1, "agent"), "1 agent");
        assert_eq!(counted(0, "agent"), "0 agents");
        assert_eq!(counted(U256::from(1), "cent"), "1 cent");
        assert_eq!(counted(U256::MAX, "cent"), format!("{} cents", U256::MAX));
        assert_eq!(every_agent_footer(1), "1 agent");
        assert_eq!(every_agent_footer(66), "66 agents");
        let page = Page { total: 1, page: 1, limit: 20, total_pages: 1, data: Vec::new() };
        assert_eq!(page_footer(&page), "page 1 of 1 (1 agent; --page N for another, --all for every page)");
        let page = Page { total: 66, page: 2, limit: 20, total_pages: 4, data: Vec::new() };
        assert!(page_footer(&page).starts_with("page 2 of 4 (66 agents;"));
    }

    #[test]
    fn stats_of_one_agent() {
        let text = stats(&one_agent_stats());
        assert!(text.starts_with("1 agent, 1 compliant (100.0%)\n"), "{text}");
        assert!(text.contains("\n  statuses     Active 1, Suspended 0, Revoked 0, Terminated 0\n"), "{text}");
        assert!(text.contains("\n  generations  0: 1\n"), "{text}");
        assert!(text.ends_with("\n  revenue      0.01 EUR, 1234.56 USD"), "{text}");
    }

    #[test]
    fn a_report_of_one_cent() {
        let report = Outcome {
            via: "relayer",
            relay_id: None,
            status: "mined".into(),
            succeeded: true,
            tx_hash: None,
            block_number: None,
            gas_used: None,
            cost_wei: None,
            revert_reason: None,
            result: Some(RegistryResult::RevenueReported {
                agent_id: 3,
                amount: U256::from(1),
                currency: "USD".into(),
                category: "compute".into(),
            }),
        };
        let text = outcome(PLAIN, "report-revenue", &report);
        assert!(text.starts_with("reported 1 cent USD for agent 3\n"), "{text}");
    }

    #[test]
    fn a_replaced_relay_lists_each_transaction_with_its_fees() {
        let view: RelayView = serde_json::from_str(concat!(
            r#"{"relayId":"0123456789abcdef0123456789abcdef","status":"mined","#,
            r#""from":"0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266","nonce":"0","#,
            r#""txHash":"0x2222222222222222222222222222222222222222222222222222222222222222","#,
            r#""previousTxHashes":["0x1111111111111111111111111111111111111111111111111111111111111111"],"#,
            r#""transactions":[{"txHash":"0x1111111111111111111111111111111111111111111111111111111111111111","#,
            r#""kind":"relay","maxFeePerGas":"2570000000","maxPriorityFeePerGas":"1000000","#,
            r#""sentAt":"2025-01-01T00:00:01.000Z"},"#,
            r#"{"txHash":"0x2222222222222222222222222222222222222222222222222222222222222222","#,
            r#""kind":"relay","maxFeePerGas":"3000000000","maxPriorityFeePerGas":"1100000","#,
            r#""sentAt":"2025-01-01T00:00:31.000Z"}],"#,
            r#""relayerNonce":4,"blockNumber":12,"gasUsed":"51234","costWei":"100","reservedWei":"200","#,
            r#""revertReason":null,"error":null,"deadline":null,"createdAt":"2025-01-01T00:00:00.000Z","#,
            r#""sentAt":"2025-01-01T00:00:01.000Z","updatedAt":null,"settledAt":"2025-01-01T00:00:40.000Z"}"#,
        ))
        .expect("the relayer's shape");
        let text = relay(PLAIN, &view);
        assert!(text.starts_with("relay 0123456789abcdef0123456789abcdef\n  status       mined\n"), "{text}");
        assert!(
            text.contains("\n  signer       0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266 (nonce 0)"),
            "{text}"
        );
        assert!(
            text.ends_with(
                "\n  sent         relay  0x1111111111111111111111111111111111111111111111111111111111111111 \
                 at 2025-01-01T00:00:01.000Z: max fee 2.57 gwei, tip 0.001 gwei\
                 \n  sent         relay  0x2222222222222222222222222222222222222222222222222222222222222222 \
                 at 2025-01-01T00:00:31.000Z: max fee 3 gwei, tip 0.0011 gwei"
            ),
            "{text}"
        );
        assert!(!text.contains("replaced"), "the list says it all: {text}");
    }

    #[test]
    fn a_missing_consent_says_who_signs_what_and_how_to_pass_it_back() {
        use alloy::primitives::{Address, B256};
        use kya_core::registry::consent::{AgentWalletConsent, Consent, ConsentKind};

        let (wallet, creator, registry) =
            (Address::repeat_byte(1), Address::repeat_byte(2), Address::repeat_byte(3));
        let typed = Consent::AgentWallet(AgentWalletConsent {
            agentWallet: wallet,
            creator,
            parentAgentId: U256::from(4),
            nonce: U256::from(0),
            deadline: U256::from(1_700_003_600),
        })
        .typed_data(84532, registry);
        let needed = super::super::missing_consents::ConsentsNeeded {
            sent: false,
            chain_id: 84532,
            registry,
            creator,
            deadline: 1_700_003_600,
            deadline_iso: "2023-11-14T23:13:20.000Z".into(),
            consents: vec![super::super::missing_consents::NeededConsent {
                consent: ConsentKind::AgentWalletConsent,
                signer: wallet,
                flag: "--wallet-consent",
                key_flag: "--wallet-key",
                digest: B256::repeat_byte(0xab),
                typed_data: &typed,
            }],
        };
        let text = consents_needed(&needed).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "register: nothing sent; a consent is missing");
        assert_eq!(
            lines[2],
            format!(
                "The agent wallet {wallet} signs this AgentWalletConsent (EIP-712, eth_signTypedData_v4); pass \
                 the signature back with --wallet-consent 0x…, or sign it here with --wallet-key / AGENT_WALLET_KEY."
            )
        );
        assert_eq!(lines[3], format!("  digest  {}", B256::repeat_byte(0xab)));
        let printed: serde_json::Value = serde_json::from_str(lines[4]).expect("the typed data on one line");
        assert_eq!(printed, serde_json::to_value(&typed).unwrap());
        assert!(
            lines[6].starts_with(
                "It names the deadline 1700003600 (2023-11-14T23:13:20.000Z) and its signer's current consent \
                 nonce: run the same command again with --consent-deadline 1700003600 and the signature."
            ),
            "{text}"
        );
    }

    #[test]
    fn kya_results_read_back_from_the_api() {
        let result: KyaResult = serde_json::from_str(concat!(
            r#"{"wallet":"0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc","isRegistered":false,"#,
            r#""isCompliant":false,"agent":null,"checkedAt":"2023-11-14T22:13:20.000Z"}"#,
        ))
        .expect("the API's shape");
        assert_eq!(
            check(PLAIN, &result),
            "deny or register\n  wallet       0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC is not registered\n  \
             checked at   2023-11-14T22:13:20.000Z"
        );
    }
}
