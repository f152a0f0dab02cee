//! The registry's revert reasons, named once: every `require` message of
//! `contracts/src/AgentRegistry.sol` (SPEC.md section 7, INTERFACE.md section 5). The edge API
//! matches reads against them, the relayer and the command line explain refusals with them, and
//! the contract tests provoke each one (`tests/it/contracts/registry_reverts.rs`, which also
//! checks that this list is exactly the contract's).

pub const ONLY_OWNER: &str = "Only owner";
pub const ONLY_REGULATOR: &str = "Only regulator";
pub const AGENT_NOT_FOUND: &str = "Agent not found";
pub const AGENT_NOT_ACTIVE: &str = "Agent not active";
pub const NOT_AUTHORIZED: &str = "Not authorized for this agent";
pub const ZERO_AGENT_WALLET: &str = "Agent wallet must not be zero";
pub const PARENT_NOT_FOUND: &str = "Parent agent not found";
pub const PARENT_NOT_ACTIVE: &str = "Parent agent not active";
pub const MAX_GENERATION_DEPTH: &str = "Max generation depth exceeded";
pub const WALLET_ALREADY_REGISTERED: &str = "Wallet already registered to another agent";
pub const OPERATIONAL_SCOPE_TOO_LONG: &str = "Operational scope too long";
pub const WALLET_CONSENT_REQUIRED: &str = "Agent wallet consent required";
pub const LIABILITY_CONSENT_REQUIRED: &str = "Haftungsperson consent required";
pub const CONSENT_EXPIRED: &str = "Consent expired";
/// A consent whose deadline lies more than `MAX_CONSENT_LIFETIME` (7 days) past its block.
pub const CONSENT_DEADLINE_TOO_FAR: &str = "Consent deadline too far";
pub const INVALID_CONSENT_SIGNATURE: &str = "Invalid consent signature";
/// `invalidateConsentsThrough(nonce)` with a `nonce` below the caller's current consent nonce.
pub const CONSENT_NONCE_ALREADY_PAST: &str = "Consent nonce already past";
pub const CURRENCY_TOO_LONG: &str = "Currency too long";
pub const CATEGORY_TOO_LONG: &str = "Category too long";
pub const ONLY_SUSPENDED_REACTIVATE: &str = "Only suspended agents can be reactivated";
pub const ALREADY_REVOKED_OR_TERMINATED: &str = "Agent already revoked or terminated";
/// `getAgentByWallet` of a wallet without an agent.
pub const NO_AGENT_FOR_WALLET: &str = "No agent registered for this wallet";

/// Every reason above, in the contract's order.
pub const ALL: [&str; 22] = [
    ONLY_OWNER,
    ONLY_REGULATOR,
    AGENT_NOT_FOUND,
    AGENT_NOT_ACTIVE,
    NOT_AUTHORIZED,
    ZERO_AGENT_WALLET,
    PARENT_NOT_FOUND,
    PARENT_NOT_ACTIVE,
    MAX_GENERATION_DEPTH,
    WALLET_ALREADY_REGISTERED,
    OPERATIONAL_SCOPE_TOO_LONG,
    WALLET_CONSENT_REQUIRED,
    LIABILITY_CONSENT_REQUIRED,
    CONSENT_EXPIRED,
    CONSENT_DEADLINE_TOO_FAR,
    INVALID_CONSENT_SIGNATURE,
    CONSENT_NONCE_ALREADY_PAST,
    CURRENCY_TOO_LONG,
    CATEGORY_TOO_LONG,
    ONLY_SUSPENDED_REACTIVATE,
    ALREADY_REVOKED_OR_TERMINATED,
    NO_AGENT_FOR_WALLET,
];
