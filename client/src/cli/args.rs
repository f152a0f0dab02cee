//! The command line's grammar (clap derive). Keys are taken as plain text and parsed later, so
//! that no clap message can echo one; their environment values are hidden from `--help`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Command-line client of the KYA agent registry: KYA checks for providers, gasless writes for
/// agents, relay and registry lookups for operators.
#[derive(Parser)]
#[command(name = "kya", version, about, long_about = None)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub(crate) global: Global,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// Options every command takes.
#[derive(Args)]
pub(crate) struct Global {
    /// Chain preset: base_sepolia, base or localhost [default: localhost when .devchain/env is
    /// found in this folder or above, else base_sepolia]
    #[arg(long, global = true, env = "REGISTRY_CHAIN")]
    pub(crate) chain: Option<String>,
    /// Base URL of the KYA read API
    #[arg(long, global = true, env = "KYA_API_URL")]
    pub(crate) api: Option<String>,
    /// Base URL of the gasless relayer
    #[arg(long, global = true, env = "RELAYER_URL")]
    pub(crate) relayer: Option<String>,
    /// JSON-RPC endpoint (receipts, consent nonces, --direct)
    #[arg(long, global = true, env = "RPC_URL", hide_env_values = true)]
    pub(crate) rpc: Option<String>,
    /// Registry address [default: the relayer's, or the chain preset's]
    #[arg(long, global = true, env = "REGISTRY_ADDRESS")]
    pub(crate) registry: Option<String>,
    /// Forwarder address to sign for [default: the relayer's /domain]
    #[arg(long, global = true, env = "FORWARDER_ADDRESS")]
    pub(crate) forwarder: Option<String>,
    /// Machine output: one JSON document on stdout
    #[arg(long, global = true)]
    pub(crate) json: bool,
    /// Seconds to wait for a write to settle
    #[arg(long, global = true, default_value_t = 120)]
    pub(crate) timeout: u64,
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// KYA decision for a wallet; exit code 0 provision, 3 renew attestation, 4 deny or register, 1 error
    Check {
        /// The wallet (checksummed, or all lower or upper case) [default: the signer's, from
        /// AGENT_PRIVATE_KEY or AGENT_KEYSTORE]
        wallet: Option<String>,
    },
    /// A signed KYA pass of a wallet (the JWS on stdout), checked offline against the API's keys;
    /// exit code 0 compliant, 3 registered but not compliant, 4 not registered, 1 error
    Pass {
        /// The wallet [default: the signer's, from AGENT_PRIVATE_KEY or AGENT_KEYSTORE]
        wallet: Option<String>,
    },
    /// An agent's record, compliance and children
    Agent { id: String },
    /// An agent's family as an indented tree
    Lineage { id: String },
    /// Lists agents (one page, or --all pages)
    Agents {
        /// Only agents in this status (Active, Suspended, Revoked, Terminated)
        #[arg(long)]
        status: Option<String>,
        /// Follow every page
        #[arg(long)]
        all: bool,
        #[arg(long, default_value_t = 1)]
        page: u64,
        /// Agents per page (at most 100)
        #[arg(long, default_value_t = 20)]
        limit: u32,
    },
    /// Registry statistics
    Stats,
    /// Registers an agent (signed by the key; the relayer pays unless --direct)
    Register(Register),
    /// Renews an agent's compliance attestation
    Attest {
        id: String,
        #[command(flatten)]
        signing: Signing,
    },
    /// Reports revenue of an agent
    ReportRevenue(ReportRevenue),
    /// Ends an agent permanently and frees its wallet
    Terminate {
        id: String,
        #[command(flatten)]
        signing: Signing,
    },
    /// Takes back the signer's unused consents: those signed for its current consent nonce, or
    /// with --through N every one signed for a nonce up to N, signed ahead or not
    InvalidateConsents {
        /// Void every consent signed for any nonce up to and including NONCE, not just the current
        /// one: without it the nonce moves by one, and a consent signed ahead for the next nonce
        /// becomes usable. The consent nonce becomes NONCE + 1; a NONCE below the current one is
        /// refused by the registry (Consent nonce already past)
        #[arg(long, value_name = "NONCE")]
        through: Option<u64>,
        #[command(flatten)]
        signing: Signing,
    },
    /// The relayer
    Relayer {
        #[command(subcommand)]
        command: RelayerCommand,
    },
    /// A relay by its id (or by a transaction hash it sent)
    Relay { id: String },
    /// Prints the ERC-8128 signature headers of an HTTP request (curl's -X, -H, -d), signed by the agent's key
    Sign(Sign),
    /// Sends an HTTP request signed with ERC-8128 by the agent's key and prints the answer, like curl
    Fetch(Fetch),
    /// Follows the registry's change feed: one line per event (JSON lines with --json), resuming
    /// where --state says it stopped
    Watch(Watch),
    /// Asks the API whether a received request's ERC-8128 signature holds, and the signer's standing;
    /// exit code 0 provision, 3 renew attestation, 4 deny or register (or a refused signature), 1 error
    Verify(Verify),
}

/// `kya watch`'s filters and where it starts.
#[derive(Args)]
pub(crate) struct Watch {
    /// Only this wallet's events (repeatable)
    #[arg(long)]
    pub(crate) wallet: Vec<String>,
    /// Only this agent's events, by id (repeatable)
    #[arg(long)]
    pub(crate) agent: Vec<String>,
    /// Only events of this type (repeatable): agent.registered, agent.status_changed, agent.attested,
    /// agent.attestation_expired, agent.revenue_reported, agent.compliance_changed, agent.unregistered
    #[arg(long = "type")]
    pub(crate) kind: Vec<String>,
    /// Only final events: each change once, once confirmed
    #[arg(long = "final")]
    pub(crate) final_only: bool,
    /// Start after this event id [default: the --state file's, else the oldest event the feed keeps]
    #[arg(long)]
    pub(crate) after: Option<String>,
    /// A file that keeps where the watch stopped: read at the start, written after each event
    #[arg(long)]
    pub(crate) state: Option<PathBuf>,
    /// Once caught up, read a page every SECS seconds (default 2) instead of following the
    /// stream (GET /api/v1/changes/stream)
    #[arg(long, value_name = "SECS", num_args = 0..=1, default_missing_value = "2")]
    pub(crate) poll: Option<u64>,
    /// Stop once caught up instead of waiting for more
    #[arg(long)]
    pub(crate) once: bool,
}

#[derive(Subcommand)]
pub(crate) enum RelayerCommand {
    /// Balance, gas budget and contracts of the relayer
    Status,
}

/// How a write is signed and sent.
#[derive(Args)]
pub(crate) struct Signing {
    /// Hex private key of the signer (prefer the environment variable: command lines are visible to other users)
    #[arg(long, env = "AGENT_PRIVATE_KEY", hide_env_values = true, conflicts_with = "keystore")]
    pub(crate) key: Option<String>,
    /// Encrypted JSON keystore of the signer; password from KYA_KEYSTORE_PASSWORD or prompted
    #[arg(long, env = "AGENT_KEYSTORE")]
    pub(crate) keystore: Option<PathBuf>,
    /// Send the transaction from the signer's own account (paying gas) instead of the relayer
    #[arg(long)]
    pub(crate) direct: bool,
    /// Gas for the registry call [default: a bound per write]
    #[arg(long)]
    pub(crate) gas: Option<u64>,
}

#[derive(Args)]
pub(crate) struct Register {
    /// Operational scope: what the agent does
    #[arg(long)]
    pub(crate) scope: String,
    /// The agent's wallet [default: --wallet-key's address, else the signer's]
    #[arg(long)]
    pub(crate) wallet: Option<String>,
    /// The liable person's wallet [default: --haftungsperson-key's address, else the signer's;
    /// children inherit their parent's]
    #[arg(long)]
    pub(crate) haftungsperson: Option<String>,
    /// Parent agent id (0: a root agent); the signer must be its wallet, creator or Haftungsperson
    #[arg(long, default_value = "0")]
    pub(crate) parent: String,
    /// The agent may modify itself
    #[arg(long)]
    pub(crate) self_modifying: bool,
    /// Constitution hash (0x + 64 hex digits)
    #[arg(long, required_unless_present = "constitution_text", conflicts_with = "constitution_text")]
    pub(crate) constitution_hash: Option<String>,
    /// Constitution text; its hash is keccak256 of the UTF-8 text
    #[arg(long)]
    pub(crate) constitution_text: Option<String>,
    /// Capability hash (0x + 64 hex digits)
    #[arg(long, required_unless_present = "capabilities", conflicts_with = "capabilities")]
    pub(crate) capability_hash: Option<String>,
    /// Capabilities, comma separated; the hash is keccak256 of the trimmed, sorted, deduplicated names joined by ','
    #[arg(long, value_delimiter = ',')]
    pub(crate) capabilities: Option<Vec<String>>,
    #[command(flatten)]
    pub(crate) consent: Consents,
    #[command(flatten)]
    pub(crate) signing: Signing,
}

/// The parties' consents, needed when the signer registers another wallet or, for a root agent,
/// names someone else Haftungsperson: signed here with their keys, or made elsewhere and passed
/// in. Without either, `register` prints the typed data to sign and sends nothing.
#[derive(Args)]
pub(crate) struct Consents {
    /// Hex private key of the agent wallet, to sign its consent here (prefer the environment variable)
    #[arg(long, env = "AGENT_WALLET_KEY", hide_env_values = true)]
    pub(crate) wallet_key: Option<String>,
    /// Hex private key of the Haftungsperson, to sign their liability consent here (prefer the environment variable)
    #[arg(long, env = "HAFTUNGSPERSON_KEY", hide_env_values = true)]
    pub(crate) haftungsperson_key: Option<String>,
    /// The agent wallet's AgentWalletConsent signature made elsewhere (0x + 65 bytes hex), for --consent-deadline
    #[arg(long)]
    pub(crate) wallet_consent: Option<String>,
    /// The Haftungsperson's LiabilityConsent signature made elsewhere (0x + 65 bytes hex), for --consent-deadline
    #[arg(long)]
    pub(crate) liability_consent: Option<String>,
    /// The deadline the consents are signed for: Unix seconds or ISO 8601 [default: an hour after the chain's latest block;
    /// required with --wallet-consent or --liability-consent]
    #[arg(long)]
    pub(crate) consent_deadline: Option<String>,
}

/// An HTTP request, with curl's options.
#[derive(Args)]
pub(crate) struct HttpRequest {
    /// The absolute http(s) URL
    pub(crate) url: String,
    /// The method [default: GET, or POST with --data]
    #[arg(short = 'X', long = "request", visible_alias = "method", value_name = "METHOD")]
    pub(crate) method: Option<String>,
    /// A header, 'Name: value' (repeatable); @file reads one a line
    #[arg(short = 'H', long = "header", value_name = "HEADER")]
    pub(crate) headers: Vec<String>,
    /// The body: text, or @file for the file's bytes as they are (@- reads stdin)
    #[arg(short = 'd', long = "data", value_name = "DATA", allow_hyphen_values = true)]
    pub(crate) data: Option<String>,
}

/// How a request is signed with ERC-8128.
#[derive(Args)]
pub(crate) struct RequestSigning {
    /// Seconds the signature stays valid (1 to 300)
    #[arg(long, default_value_t = 60)]
    pub(crate) window: u64,
    /// Also cover this header field, given with -H (repeatable): content-type, say
    #[arg(long, value_name = "NAME")]
    pub(crate) cover: Vec<String>,
    /// The chain id the keyid names, where the agent is registered [default: the chain's]
    #[arg(long)]
    pub(crate) chain_id: Option<u64>,
    /// Hex private key of the agent (prefer the environment variable: command lines are visible to other users)
    #[arg(long, env = "AGENT_PRIVATE_KEY", hide_env_values = true, conflicts_with = "keystore")]
    pub(crate) key: Option<String>,
    /// Encrypted JSON keystore of the agent; password from KYA_KEYSTORE_PASSWORD or prompted
    #[arg(long, env = "AGENT_KEYSTORE")]
    pub(crate) keystore: Option<PathBuf>,
}

#[derive(Args)]
pub(crate) struct Sign {
    #[command(flatten)]
    pub(crate) request: HttpRequest,
    #[command(flatten)]
    pub(crate) signing: RequestSigning,
}

#[derive(Args)]
pub(crate) struct Fetch {
    #[command(flatten)]
    pub(crate) request: HttpRequest,
    #[command(flatten)]
    pub(crate) signing: RequestSigning,
    /// Print the status line and the response's headers before its body
    #[arg(short = 'i', long)]
    pub(crate) include: bool,
    /// Send no KYA-Pass header [default: the signer's pass from the API goes with the request]
    #[arg(long)]
    pub(crate) no_pass: bool,
}

/// A request a provider received, to verify.
#[derive(Args)]
pub(crate) struct Verify {
    /// The absolute URL it was sent to (as the agent signed it: the host the provider serves)
    #[arg(long)]
    pub(crate) url: String,
    /// Its method [default: GET, or POST with --data]
    #[arg(short = 'X', long = "method", visible_alias = "request", value_name = "METHOD")]
    pub(crate) method: Option<String>,
    /// A header it carried, 'Name: value' (repeatable; at least Signature-Input and Signature; a
    /// KYA-Pass is checked offline against the API's keys); @file reads one a line
    #[arg(short = 'H', long = "header", value_name = "HEADER")]
    pub(crate) headers: Vec<String>,
    /// Its body: text, or @file (@- reads stdin); without it, a Content-Digest header is trusted
    #[arg(short = 'd', long = "data", value_name = "DATA", allow_hyphen_values = true)]
    pub(crate) data: Option<String>,
    /// The host the provider serves, host[:port], which the signature must name (required, as at
    /// the API: the URL may have been rebuilt from the request's own Host header)
    #[arg(long, required = true)]
    pub(crate) authority: String,
    /// Which signature to check when there are several [default: eth, else the only one]
    #[arg(long)]
    pub(crate) label: Option<String>,
}

#[derive(Args)]
pub(crate) struct ReportRevenue {
    pub(crate) id: String,
    /// Amount in currency units, at most two decimals (12.50); recorded in cents
    #[arg(long, allow_hyphen_values = true)]
    pub(crate) amount: String,
    /// Currency code (USD, EUR, ...)
    #[arg(long)]
    pub(crate) currency: String,
    /// Category (compute, data, api-calls, ...)
    #[arg(long)]
    pub(crate) category: String,
    /// Period start: Unix seconds or an ISO 8601 time (2025-01-01T00:00:00Z) [default: the period end]
    #[arg(long)]
    pub(crate) period_start: Option<String>,
    /// Period end: Unix seconds or an ISO 8601 time [default: now]
    #[arg(long)]
    pub(crate) period_end: Option<String>,
    #[command(flatten)]
    pub(crate) signing: Signing,
}
