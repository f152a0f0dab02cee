//! Deterministic seed data for the registry.
//!
//! [`seed_demo`] writes a small, hand-shaped registry that exercises every rule and response
//! shape: all four statuses, a lineage five generations deep, a parent with 55 children, lapsed
//! attestations (the clock jumps 8 days between registration and re-attestation), and revenue in
//! several currencies and categories. Every seeding transaction is mined at a timestamp the seed
//! chooses (`evm_setNextBlockTimestamp`), so the returned [`DemoData`] is an exact model of the
//! chain state that tests compare the APIs against.
//!
//! [`seed_bulk`] registers N agents quickly for benchmarks, with the same mix of shapes
//! (`seed/bulk.rs`).

mod bulk;

pub use bulk::seed_bulk;

use alloy::{
    primitives::{Address, U256, keccak256},
    sol_types::SolCall,
};
use kya_core::{Agent, AgentStatus, chain::abi::AgentRegistry};
use serde::Serialize;

use crate::{
    Chain, Deployment, TxError,
    consent::{CONSENT_VALIDITY_SECS, ConsentNonces, sign_consents},
    dev_accounts::{self, Role},
};

/// Seconds in a day.
pub const DAY: u64 = 86_400;
/// How far the clock jumps between registration and re-attestation: past the 7-day grace period.
pub const TIME_TRAVEL: u64 = 8 * DAY;
/// Number of children of the demo's wide parent (more than the lineage endpoint's 50 per node).
pub const HIVE_CHILDREN: u64 = 55;

/// One seeded agent: its record as the chain holds it after seeding, and what the seed knows
/// beside it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SeededAgent {
    /// Written by the seed as it sends each transaction, not read back from the chain: the
    /// tests compare the chain and the APIs against it.
    #[serde(flatten)]
    pub record: Agent,
    /// Index for [`dev_accounts::agent_wallet`], which gives the wallet's private key.
    pub wallet_index: u64,
    /// Whether the registry still binds the agent's wallet to it (`walletToAgent`): true until
    /// the agent terminates itself, which frees the wallet. A revoked agent keeps its wallet, so
    /// `/kya/<wallet>` reads it as registered, and the wallet cannot be registered again.
    pub wallet_bound: bool,
    /// Direct children in registration order.
    pub children: Vec<u64>,
}

/// One seeded revenue report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SeededRevenue {
    pub agent_id: u64,
    /// In cents.
    pub amount: u64,
    pub currency: String,
    pub category: String,
    pub period_start: u64,
    pub period_end: u64,
    pub reported_at: u64,
}

/// Agents of the demo with a particular role in tests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DemoRoles {
    /// Root to leaf of a lineage five generations deep (generations 0 to 4).
    pub lineage: Vec<u64>,
    /// A root with [`HIVE_CHILDREN`] children.
    pub hive: u64,
    /// Active, attested after the time travel: compliant.
    pub compliant: u64,
    /// Active, never re-attested after the time travel: lapsed.
    pub lapsed: u64,
    pub suspended: u64,
    /// Revoked by the regulator; its wallet stays bound to it.
    pub revoked: u64,
    /// Terminated by its creator; its wallet is free.
    pub terminated: u64,
    /// Suspended, then reactivated by the regulator.
    pub reactivated: u64,
}

/// The exact state that [`seed_demo`] leaves on chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DemoData {
    /// Indexed by `agent_id - 1`.
    pub agents: Vec<SeededAgent>,
    /// In the order reported (per agent, that is the on-chain history order).
    pub revenue: Vec<SeededRevenue>,
    pub roles: DemoRoles,
    /// Timestamp of the last seeding transaction.
    pub seeded_until: u64,
}

impl DemoData {
    /// The seeded agent with this id.
    pub fn agent(&self, agent_id: u64) -> &SeededAgent {
        &self.agents[usize::try_from(agent_id - 1).expect("ids fit usize")]
    }

    /// The agent the registry binds `wallet` to (`getAgentByWallet`), if any.
    pub fn agent_of_wallet(&self, wallet: Address) -> Option<&SeededAgent> {
        self.agents.iter().find(|agent| agent.wallet_bound && agent.record.agent_wallet == wallet)
    }

    /// The revenue history of one agent, oldest first.
    pub fn revenue_of(&self, agent_id: u64) -> Vec<&SeededRevenue> {
        self.revenue.iter().filter(|report| report.agent_id == agent_id).collect()
    }
}

/// Seeds the demo registry on a fresh deployment (ids must start at 1).
pub async fn seed_demo(chain: &Chain, deployment: &Deployment) -> Result<DemoData, TxError> {
    let mut seeder = Seeder::start(chain, deployment).await?;
    let creator_a = dev_accounts::address(Role::CreatorA);
    let creator_b = dev_accounts::address(Role::CreatorB);
    let creator_c = dev_accounts::address(Role::CreatorC);
    let liable = dev_accounts::address(Role::Outsider);

    // A lineage five generations deep; children inherit the root's Haftungsperson. Each child is
    // registered by its parent's creator: only the parent's wallet, creator or Haftungsperson may.
    let mut lineage =
        vec![seeder.register(creator_a, creator_a, "atlas: orchestrates research agents", 0, true).await?];
    for generation in 1..5u64 {
        let parent = *lineage.last().expect("lineage has a root");
        let scope = format!("atlas lineage generation {generation}: delegated research");
        lineage.push(seeder.register(creator_a, creator_a, &scope, parent, generation % 2 == 0).await?);
    }

    let hive = seeder.register(creator_b, liable, "hive: coordinates a swarm of crawlers", 0, false).await?;
    let mut hive_children = Vec::new();
    for index in 0..HIVE_CHILDREN {
        let scope = format!("hive worker {index}: crawls and summarises public data");
        hive_children.push(seeder.register(creator_b, liable, &scope, hive, false).await?);
    }

    let suspended = seeder.register(creator_c, creator_c, "scraper under investigation", 0, false).await?;
    let revoked = seeder.register(creator_c, creator_c, "trader with revoked licence", 0, true).await?;
    let terminated = seeder.register(creator_c, creator_c, "helper that ended itself", 0, false).await?;
    let lapsed = seeder.register(creator_a, liable, "analyst that stopped attesting", 0, false).await?;
    let reactivated =
        seeder.register(creator_a, creator_a, "auditor suspended and cleared", 0, false).await?;
    seeder.suspend(reactivated).await?;
    seeder.reactivate(reactivated).await?;

    // Past the grace period: everything registered so far is now lapsed until it attests again.
    seeder.clock += TIME_TRAVEL;

    let mut reattested: Vec<u64> = lineage.clone();
    reattested.push(hive);
    reattested.extend(hive_children.iter().copied().filter(|id| id % 2 == 0));
    reattested.push(reactivated);
    for agent_id in reattested {
        seeder.attest(agent_id).await?;
    }

    let currencies = ["USD", "EUR", "GBP"];
    let categories = ["compute", "data", "api-calls"];
    for index in 0..12u64 {
        let pick = usize::try_from(index).expect("small index");
        let amount = 10_000 + index * 2_550;
        seeder.report(lineage[0], amount, currencies[pick % 3], categories[(pick / 3) % 3], index).await?;
    }
    for (index, agent_id) in [lineage[1], lineage[1], lineage[2]].into_iter().enumerate() {
        let index = u64::try_from(index).expect("small index");
        seeder.report(agent_id, 4_200 + index * 100, "EUR", "inference", index).await?;
    }
    for (index, (currency, category)) in
        [("JPY", "consulting"), ("USD", "inference"), ("JPY", "compute"), ("CHF", "licensing")]
            .into_iter()
            .enumerate()
    {
        let index = u64::try_from(index).expect("small index");
        seeder.report(hive, 150_000 + index * 1_000, currency, category, index).await?;
    }

    seeder.suspend(suspended).await?;
    seeder.revoke(revoked).await?;
    seeder.terminate(terminated).await?;

    let compliant = lineage[0];
    let seeded_until = seeder.clock - 1;
    let data = DemoData {
        agents: seeder.agents,
        revenue: seeder.revenue,
        roles: DemoRoles { lineage, hive, compliant, lapsed, suspended, revoked, terminated, reactivated },
        seeded_until,
    };
    verify_count(chain, deployment, data.agents.len()).await?;
    for agent_id in [data.roles.revoked, data.roles.terminated] {
        verify_wallet_binding(chain, deployment, &data, data.agent(agent_id).record.agent_wallet).await?;
    }
    Ok(data)
}

/// Sends the demo's transactions one at a time, each at the next second of its own clock, and
/// keeps the model of what the chain holds.
struct Seeder<'a> {
    chain: &'a Chain,
    deployment: &'a Deployment,
    clock: u64,
    agents: Vec<SeededAgent>,
    revenue: Vec<SeededRevenue>,
}

impl<'a> Seeder<'a> {
    async fn start(chain: &'a Chain, deployment: &'a Deployment) -> Result<Self, TxError> {
        let next_id = next_agent_id(chain, deployment.registry).await?;
        if next_id != 1 {
            return Err(TxError::Reverted(format!(
                "demo seed needs an empty registry, next id is {next_id}"
            )));
        }
        let clock = chain.latest_timestamp().await? + 1;
        Ok(Self { chain, deployment, clock, agents: Vec::new(), revenue: Vec::new() })
    }

    /// Sends `call` from `from` in a block at the seed clock's next second; returns that time.
    async fn send_at_next_second<C: SolCall>(&mut self, from: Address, call: &C) -> Result<u64, TxError> {
        let timestamp = self.clock;
        self.chain.set_next_timestamp(timestamp).await?;
        self.chain.send(from, self.deployment.registry, call).await?;
        self.clock += 1;
        Ok(timestamp)
    }

    async fn register(
        &mut self,
        creator: Address,
        haftungsperson: Address,
        scope: &str,
        parent: u64,
        self_modifying: bool,
    ) -> Result<u64, TxError> {
        let agent_id = u64::try_from(self.agents.len()).expect("fits") + 1;
        let wallet_index = agent_id;
        let wallet_key = dev_accounts::agent_wallet(wallet_index);
        let wallet = wallet_key.address();
        let call = register_call(haftungsperson, wallet, scope, parent, self_modifying);
        // The seed goes through the consent rules: the fresh wallet signs, and so does a root's
        // Haftungsperson when someone else registers it (a development account, whose key we hold).
        let liable_key = dev_accounts::role_of(haftungsperson).map(dev_accounts::signer);
        let signers: Vec<_> = std::iter::once(&wallet_key).chain(liable_key.as_ref()).collect();
        let nonces = ConsentNonces::read(self.chain, self.deployment.registry, &call).await?;
        let chain_id = self.chain.chain_id().await?;
        // The seed's own clock: the block this registration goes into is at `self.clock`.
        let deadline = self.clock + CONSENT_VALIDITY_SECS;
        let call = sign_consents(
            call.clone(),
            creator,
            (chain_id, self.deployment.registry),
            nonces,
            &signers,
            deadline,
        );
        let registered_at = self.send_at_next_second(creator, &call).await?;

        let (generation, haftungsperson) = match parent {
            0 => (0, haftungsperson),
            parent => {
                let parent = &mut self.agents[usize::try_from(parent - 1).expect("fits")];
                parent.children.push(agent_id);
                (parent.record.generation + 1, parent.record.haftungsperson)
            }
        };
        let record = Agent {
            agent_id,
            creator,
            haftungsperson,
            agent_wallet: wallet,
            constitution_hash: call.constitutionHash,
            capability_hash: call.capabilityHash,
            operational_scope: scope.to_owned(),
            parent_agent_id: parent,
            generation,
            self_modifying,
            registered_at,
            last_attestation: registered_at,
            last_revenue_report: 0,
            status: AgentStatus::Active,
        };
        self.agents.push(SeededAgent { record, wallet_index, wallet_bound: true, children: Vec::new() });
        Ok(agent_id)
    }

    fn agent_mut(&mut self, agent_id: u64) -> &mut Agent {
        &mut self.agents[usize::try_from(agent_id - 1).expect("fits")].record
    }

    async fn attest(&mut self, agent_id: u64) -> Result<(), TxError> {
        let creator = self.agent_mut(agent_id).creator;
        let at = self
            .send_at_next_second(
                creator,
                &AgentRegistry::attestComplianceCall { agentId: U256::from(agent_id) },
            )
            .await?;
        self.agent_mut(agent_id).last_attestation = at;
        Ok(())
    }

    /// Reports revenue for the `period`-th 30-day period before the seed started.
    async fn report(
        &mut self,
        agent_id: u64,
        amount: u64,
        currency: &str,
        category: &str,
        period: u64,
    ) -> Result<(), TxError> {
        let creator = self.agent_mut(agent_id).creator;
        let period_end = self.agent_mut(agent_id).registered_at - period * 30 * DAY;
        let period_start = period_end - 30 * DAY;
        let call = AgentRegistry::reportRevenueCall {
            agentId: U256::from(agent_id),
            amount: U256::from(amount),
            currency: currency.to_owned(),
            category: category.to_owned(),
            periodStart: period_start,
            periodEnd: period_end,
        };
        let reported_at = self.send_at_next_second(creator, &call).await?;
        self.agent_mut(agent_id).last_revenue_report = reported_at;
        self.revenue.push(SeededRevenue {
            agent_id,
            amount,
            currency: currency.to_owned(),
            category: category.to_owned(),
            period_start,
            period_end,
            reported_at,
        });
        Ok(())
    }

    async fn suspend(&mut self, agent_id: u64) -> Result<(), TxError> {
        let regulator = self.deployment.regulator;
        self.send_at_next_second(
            regulator,
            &AgentRegistry::suspendAgentCall { agentId: U256::from(agent_id) },
        )
        .await?;
        self.agent_mut(agent_id).status = AgentStatus::Suspended;
        Ok(())
    }

    async fn reactivate(&mut self, agent_id: u64) -> Result<(), TxError> {
        let regulator = self.deployment.regulator;
        self.send_at_next_second(
            regulator,
            &AgentRegistry::reactivateAgentCall { agentId: U256::from(agent_id) },
        )
        .await?;
        self.agent_mut(agent_id).status = AgentStatus::Active;
        Ok(())
    }

    async fn revoke(&mut self, agent_id: u64) -> Result<(), TxError> {
        let regulator = self.deployment.regulator;
        self.send_at_next_second(
            regulator,
            &AgentRegistry::revokeAgentCall { agentId: U256::from(agent_id) },
        )
        .await?;
        // The wallet stays bound to the revoked record.
        self.agent_mut(agent_id).status = AgentStatus::Revoked;
        Ok(())
    }

    async fn terminate(&mut self, agent_id: u64) -> Result<(), TxError> {
        let creator = self.agent_mut(agent_id).creator;
        self.send_at_next_second(
            creator,
            &AgentRegistry::terminateSelfCall { agentId: U256::from(agent_id) },
        )
        .await?;
        self.agent_mut(agent_id).status = AgentStatus::Terminated;
        self.agents[usize::try_from(agent_id - 1).expect("fits")].wallet_bound = false;
        Ok(())
    }
}

/// The registration call of a seeded agent; hashes derive from the scope so they are distinct.
fn register_call(
    haftungsperson: Address,
    agent_wallet: Address,
    scope: &str,
    parent: u64,
    self_modifying: bool,
) -> AgentRegistry::registerAgentCall {
    AgentRegistry::registerAgentCall {
        haftungsperson,
        agentWallet: agent_wallet,
        constitutionHash: keccak256(format!("constitution: {scope}")),
        capabilityHash: keccak256(format!("capabilities: {scope}")),
        operationalScope: scope.to_owned(),
        parentAgentId: U256::from(parent),
        selfModifying: self_modifying,
    }
}

async fn next_agent_id(chain: &Chain, registry: Address) -> Result<u64, TxError> {
    let next = chain.view(registry, &AgentRegistry::nextAgentIdCall {}).await?;
    Ok(u64::try_from(next).expect("agent ids fit u64"))
}

/// The chain binds `wallet` to the agent the model says (revoking keeps the binding, terminating
/// drops it), so a model drifting from the registry's rules fails the seed.
async fn verify_wallet_binding(
    chain: &Chain,
    deployment: &Deployment,
    data: &DemoData,
    wallet: Address,
) -> Result<(), TxError> {
    let bound = chain.view(deployment.registry, &AgentRegistry::walletToAgentCall(wallet)).await?;
    let modelled = data.agent_of_wallet(wallet).map_or(0, |agent| agent.record.agent_id);
    if bound == U256::from(modelled) {
        Ok(())
    } else {
        Err(TxError::Reverted(format!(
            "the registry binds {wallet} to agent {bound}, the model to {modelled}"
        )))
    }
}

async fn verify_count(chain: &Chain, deployment: &Deployment, expected: usize) -> Result<(), TxError> {
    let on_chain = next_agent_id(chain, deployment.registry).await? - 1;
    if on_chain == u64::try_from(expected).expect("fits") {
        Ok(())
    } else {
        Err(TxError::Reverted(format!("seeded {expected} agents but the registry holds {on_chain}")))
    }
}
