//! The registry contract's facts and types: its records, statuses and amounts, the rules it
//! holds agents to, the typed data its writes are signed as, and its revert reasons.
//!
//! - [`record`]: agent records and revenue reports as the registry stores them.
//! - `status`: the agent status enum and its JSON names ([`AgentStatus`](crate::AgentStatus)).
//! - `compliance`: an agent's compliance at a given time ([`Compliance`](crate::Compliance)).
//! - `badge`: an agent's one-word badge ([`ComplianceBadge`](crate::ComplianceBadge)).
//! - `amount`: revenue amounts and sums in cents, exact ([`Cents`](crate::Cents)).
//! - [`lineage`]: the lineage tree of `/agent/:id/lineage`, with its bounds.
//! - [`consent`]: the EIP-712 consents of a registration, and the call that carries them.
//! - [`forward_request`]: EIP-712 typed data and digests of the forwarder's `ForwardRequest`.
//! - [`call`]: which call data the relayer forwards: exactly one registry write.
//! - [`gas`]: the gas a forward request gives the registry write it carries.
//! - [`hashes`]: a registration's constitution and capability hashes, from text and names.
//! - [`reverts`]: the registry's revert reasons, named once.

pub(crate) mod amount;
pub(crate) mod badge;
pub mod call;
pub(crate) mod compliance;
pub mod consent;
pub mod forward_request;
pub mod gas;
pub mod hashes;
pub mod lineage;
pub mod record;
pub mod reverts;
pub(crate) mod status;
