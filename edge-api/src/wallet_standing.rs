//! One wallet's standing at one block, for the answers that state it about a single signer: a
//! KYA pass (`GET /api/v1/kya/:wallet/pass`) and a verified ERC-8128 request
//! (`POST /api/v1/kya/verify`). From the index beside the Worker while it is fresh, with no RPC
//! (its block and that block's hash as the index recorded them together); else from the chain,
//! saying why (`X-Index-Fallback`), and read at the latest block by its hash when the answer is
//! to name the hash ([`reads::hashed`]).

use alloy_primitives::{Address, B256};
use kya_core::{Agent, BlockRef};
use worker::Env;

use crate::{
    Result,
    config::Config,
    index::point::{self, Point},
    reads,
    rpc::Rpc,
};

/// A wallet's standing at `block`, and the headers saying where it was read.
pub(crate) struct WalletStanding {
    pub(crate) block: BlockRef,
    /// The block's hash: always from the index; from the chain only when it was asked for.
    pub(crate) hash: Option<B256>,
    /// The registry's attestation grace period at `block`.
    pub(crate) grace_period: u64,
    /// The agent whose record names the wallet, as `getAgentByWallet` gives it.
    pub(crate) agent: Option<Agent>,
    /// `X-Index-Lag-Blocks` and `X-Index-Run-At`, or `X-Index-Fallback`; and the D1 session's
    /// bookmark, for the client to send back ([`point::answer_headers`]): set by the answer with
    /// its own, in one call.
    pub(crate) headers: Vec<(&'static str, String)>,
}

/// What to read, for whom, and how.
pub(crate) struct StandingRead<'a> {
    pub(crate) wallet: Address,
    /// Wall-clock Unix seconds: how fresh the index must be is measured from it.
    pub(crate) now: u64,
    /// The client's `X-D1-Bookmark`: an answer never older than one it has seen.
    pub(crate) bookmark: Option<&'a str>,
    /// Whether the answer names the block's hash (a pass does): the chain is then read at the
    /// latest block by its hash, one round trip more.
    pub(crate) with_hash: bool,
}

/// `wallet`'s standing, from the index while fresh, else from the chain through `rpc`.
pub(crate) async fn read(
    env: &Env,
    config: &Config,
    rpc: &Rpc<'_>,
    StandingRead { wallet, now, bookmark, with_hash }: StandingRead<'_>,
) -> Result<WalletStanding> {
    let (point, bookmark) = point::wallets_from_index(env, &config.index, &[wallet], now, bookmark).await?;
    let headers = point::answer_headers(bookmark, &point);
    match point {
        Point::Answer(at, _, mut agents) => Ok(WalletStanding {
            block: at.block,
            hash: Some(at.hash),
            grace_period: at.clock.grace_period,
            agent: agents.pop().flatten(),
            headers,
        }),
        Point::Fallback(_) => {
            let registry = config.registry()?;
            let read = |rpc| async move { reads::kya(&rpc, registry, wallet).await };
            let (block, hash, (grace_period, agent)) = if with_hash {
                let (block, hash, standing) = reads::hashed(rpc, read).await?;
                (block, Some(hash), standing)
            } else {
                let (block, standing) = read(*rpc).await?;
                (block, None, standing)
            };
            Ok(WalletStanding { block, hash, grace_period, agent, headers })
        }
    }
}
