//! A registry as the chain would answer for it, and everything the cases start from.

use alloy_primitives::{Address, B256, U256, aliases::U48};
use alloy_sol_types::{Eip712Domain, SolCall};
use kya_core::{
    Agent, BlockRef, Revenue, Snapshot, SnapshotAnswers,
    chain::{abi::AgentRegistry, rpc::CallPlan},
    registry::forward_request::{self, ForwardRequest},
};

use crate::{BATCH_SIZE, PassFixture};

/// The snapshot's "now": a week and a bit after the first registration.
const NOW: u64 = 1_700_000_000 + 8 * 86_400;

/// A registry of `agents` agents as the chain would answer for it.
pub struct Fixture {
    /// The `getAgent` calls of every agent.
    pub plan: CallPlan,
    /// The JSON-RPC batch answers to `plan`'s bodies.
    pub answers: Vec<String>,
    pub snapshot: Snapshot,
    /// The snapshot as JSON (how the Cache API held it before `SnapshotAnswers`).
    pub snapshot_json: String,
    /// The snapshot's answers, and their compact form as the Cache API holds it.
    pub snapshot_answers: SnapshotAnswers,
    pub snapshot_answers_text: String,
    /// A request to digest, and the domain it is signed in.
    pub request: ForwardRequest,
    pub domain: Eip712Domain,
    /// A pass of the first agent's wallet, signed at the snapshot's "now".
    pub pass: PassFixture,
}

impl Fixture {
    /// A registry of `agents` agents: every third reports revenue, one in fifty is not Active.
    pub fn new(agents: u64) -> Self {
        let mut plan = CallPlan::new(Address::repeat_byte(0x2e));
        let records: Vec<AgentRegistry::AgentRecord> = (1..=agents).map(record).collect();
        for record in &records {
            plan.push(&AgentRegistry::getAgentCall { agentId: record.agentId });
        }
        let answers = records
            .chunks(BATCH_SIZE)
            .enumerate()
            .map(|(batch, chunk)| {
                let responses: Vec<String> = chunk
                    .iter()
                    .enumerate()
                    .map(|(offset, record)| {
                        let data = AgentRegistry::getAgentCall::abi_encode_returns(record);
                        format!(
                            r#"{{"jsonrpc":"2.0","id":{},"result":"{}"}}"#,
                            batch * BATCH_SIZE + offset,
                            alloy_primitives::hex::encode_prefixed(data)
                        )
                    })
                    .collect();
                format!("[{}]", responses.join(","))
            })
            .collect();
        let mut fixture = Self {
            plan,
            answers,
            snapshot: Snapshot {
                block: BlockRef { number: 1_234, timestamp: NOW },
                grace_period: kya_core::DEFAULT_GRACE_PERIOD_SECS,
                agents: vec![],
                revenue: vec![],
                revenue_unreadable: vec![],
            },
            snapshot_json: String::new(),
            snapshot_answers: SnapshotAnswers::render(
                &Snapshot {
                    block: BlockRef { number: 0, timestamp: 0 },
                    grace_period: kya_core::DEFAULT_GRACE_PERIOD_SECS,
                    agents: vec![],
                    revenue: vec![],
                    revenue_unreadable: vec![],
                },
                &Address::ZERO,
                "",
            ),
            snapshot_answers_text: String::new(),
            request: sample_request(),
            pass: PassFixture::new(Agent::try_from(record(1)).expect("a valid record"), NOW),
            domain: forward_request::domain(
                forward_request::BASE_SEPOLIA_CHAIN_ID,
                Address::repeat_byte(0x70),
            ),
        };
        fixture.snapshot.agents = fixture.decode_agents();
        fixture.snapshot.revenue = (1..=agents).filter(|id| id.is_multiple_of(3)).map(revenue).collect();
        fixture.snapshot_json = serde_json::to_string(&fixture.snapshot).expect("serialises");
        fixture.snapshot_answers =
            SnapshotAnswers::render(&fixture.snapshot, &Address::ZERO, "http://127.0.0.1:8545");
        fixture.snapshot_answers_text = fixture.snapshot_answers.encode();
        fixture
    }

    /// What the Worker does with the answers on a cache miss.
    pub fn decode_agents(&self) -> Vec<Agent> {
        self.plan
            .decode(&self.answers)
            .expect("well-formed answers")
            .iter()
            .map(|outcome| {
                Agent::try_from(outcome.decode::<AgentRegistry::getAgentCall>().expect("a record"))
                    .expect("a valid record")
            })
            .collect()
    }
}

fn record(id: u64) -> AgentRegistry::AgentRecord {
    let byte = |salt: u64| Address::from_word(B256::from(U256::from(id * 7 + salt)));
    let parent = if id <= 10 { 0 } else { id / 10 };
    AgentRegistry::AgentRecord {
        agentId: U256::from(id),
        creator: byte(1),
        haftungsperson: byte(2),
        agentWallet: byte(3),
        constitutionHash: B256::from(U256::from(id)),
        capabilityHash: B256::from(U256::from(id + 1)),
        operationalScope: format!("Automated market making on venue {}", id % 17),
        parentAgentId: U256::from(parent),
        generation: U256::from(if parent == 0 { 0 } else { id.ilog10() }),
        selfModifying: id.is_multiple_of(5),
        registeredAt: 1_700_000_000 + id,
        lastAttestation: 1_700_000_000 + id + if id.is_multiple_of(4) { 0 } else { 7 * 86_400 },
        lastRevenueReport: if id.is_multiple_of(3) { 1_700_000_500 + id } else { 0 },
        status: match id % 50 {
            7 => 1,
            13 => 2,
            29 => 3,
            _ => 0,
        },
    }
}

fn revenue(id: u64) -> Revenue {
    Revenue {
        agent_id: id,
        amount: U256::from(id) * U256::from(1_250),
        currency: ["USD", "EUR", "USDC"][(id % 3) as usize].to_owned(),
        category: ["compute", "trading", "services", "licensing"][(id % 4) as usize].to_owned(),
        period_start: 1_700_000_000,
        period_end: 1_700_086_400,
        reported_at: 1_700_000_500 + id,
    }
}

fn sample_request() -> ForwardRequest {
    ForwardRequest {
        from: Address::repeat_byte(0x11),
        to: Address::repeat_byte(0x2e),
        value: U256::ZERO,
        gas: U256::from(300_000),
        nonce: U256::from(7),
        deadline: U48::from(1_900_000_000u64),
        data: AgentRegistry::attestComplianceCall { agentId: U256::from(42) }.abi_encode().into(),
    }
}
