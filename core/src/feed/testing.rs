//! Feed entries for tests, here and in the crates that read the feed (feature `test-util`), so
//! each test suite does not write its own builder.

use alloy_primitives::Address;

use crate::{
    AgentStatus,
    feed::{Change, Cursor, Detail, Event, EventBlock, EventType, Standing},
};

/// A provisional `agent.attested` entry at `cursor` of agent `agent_id` (its wallet: the id's
/// low byte repeated), in `block`, the agent active and compliant after it.
pub fn attested(cursor: Cursor, agent_id: u64, block: EventBlock) -> Event {
    Event::provisional(
        cursor,
        Change {
            kind: EventType::Attested,
            agent_id,
            wallet: Address::repeat_byte(agent_id as u8),
            block,
            log: None,
            standing: Standing { is_registered: true, is_compliant: true, status: Some(AgentStatus::Active) },
            detail: Detail::None {},
        },
    )
}
