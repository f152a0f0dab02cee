//! `POST /api/v1/kya/batch` (INTERFACE.md section 7): the KYA results of up to 100 wallets at one
//! block, read in one round trip. It counts as one request per 10 wallets against the rate limit,
//! so a batch is not a way around it.

use alloy_primitives::Address;
use kya_core::{KyaBatch, KyaResult, StandingClock, api::query::parse_wallet};
use serde::Deserialize;
use worker::{Request, Response};

use crate::{
    Error, Result, http,
    index::point::{self, Point},
    reads, request_body,
    rpc::Rpc,
};

/// The path of the endpoint.
pub(crate) const PATH: &str = "/api/v1/kya/batch";
/// Wallets one batch holds at most.
pub(crate) const MAX_WALLETS: usize = 100;
/// Wallets that count as one request against the rate limit.
const WALLETS_PER_REQUEST: usize = 10;
/// The largest body read: 100 addresses with room for spaces.
const MAX_BODY_BYTES: usize = 16 << 10;

/// The requests a batch of `wallets` counts as: one per 10 wallets, at least one.
pub(crate) fn weight(wallets: usize) -> u64 {
    wallets.div_ceil(WALLETS_PER_REQUEST).max(1) as u64
}

/// Reads and checks the body: `{"wallets": [...]}` with 1 to 100 addresses. Every refusal names
/// what to fix.
pub(crate) async fn read(request: &mut Request) -> Result<Vec<Address>> {
    parse(&request_body::read_text(request, MAX_BODY_BYTES).await?)
}

fn parse(text: &str) -> Result<Vec<Address>> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Body {
        wallets: Vec<String>,
    }
    if text.len() > MAX_BODY_BYTES {
        return Err(bad(format!("the body is {} bytes; at most {MAX_BODY_BYTES} are accepted", text.len())));
    }
    let body: Body = serde_json::from_str(text)
        .map_err(|error| bad(format!("the body must be {{\"wallets\": [addresses]}}: {error}")))?;
    if body.wallets.is_empty() || body.wallets.len() > MAX_WALLETS {
        return Err(bad(format!(
            "wallets holds {} addresses; a batch holds 1 to {MAX_WALLETS}",
            body.wallets.len()
        )));
    }
    body.wallets
        .iter()
        .enumerate()
        .map(|(index, wallet)| {
            parse_wallet(wallet).map_err(|error| bad(format!("wallets[{index}]: {error}")))
        })
        .collect()
}

fn bad(message: String) -> Error {
    Error::BadBody(message)
}

/// The results of `wallets`, in order, at one block: the index's with no RPC while it is fresh
/// (`index::point`), else the chain's, saying why.
pub(crate) async fn answer(
    env: &worker::Env,
    config: &crate::config::Config,
    rpc: &Rpc<'_>,
    wallets: &[Address],
    (now, bookmark): (u64, Option<&str>),
) -> Result<Response> {
    let (point, bookmark) = point::wallets_from_index(env, &config.index, wallets, now, bookmark).await?;
    let standing_headers = point::answer_headers(bookmark, &point);
    let (block, grace_period, agents) = match point {
        Point::Answer(at, _, agents) => (at.block, at.clock.grace_period, agents),
        Point::Fallback(_) => {
            let (block, (grace_period, agents)) = reads::kya_many(rpc, config.registry()?, wallets).await?;
            (block, grace_period, agents)
        }
    };
    let clock = StandingClock::new(block.timestamp, grace_period);
    let results = wallets
        .iter()
        .zip(&agents)
        .map(|(wallet, agent)| KyaResult::of(*wallet, agent.as_ref(), clock))
        .collect();
    let body =
        serde_json::to_string(&KyaBatch { block, results }).map_err(|error| Error::Runtime(error.into()))?;
    let mut pairs = vec![("cache-control", "no-store".to_owned())];
    http::push_block(&mut pairs, block, Some(grace_period));
    pairs.extend(standing_headers);
    http::json_with(200, &body, pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_counts_one_request_per_ten_wallets() {
        assert_eq!([1, 9, 10, 11, 100].map(weight), [1, 1, 1, 2, 10]);
        assert_eq!(weight(0), 1, "a refused body still counts as a request");
    }

    #[test]
    fn bodies_are_checked_with_messages_naming_the_fault() {
        let wallet = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266";
        let ok = parse(&format!(r#"{{"wallets":["{wallet}","{}"]}}"#, wallet.to_lowercase())).unwrap();
        assert_eq!(ok.len(), 2);
        assert_eq!(ok[0], ok[1]);
        let refuse = |text: &str| parse(text).unwrap_err().to_string();
        assert!(refuse("[]").starts_with("the body must be {\"wallets\": [addresses]}"));
        assert!(refuse(r#"{"wallets":[],"x":1}"#).contains("unknown field"));
        assert_eq!(refuse(r#"{"wallets":[]}"#), "wallets holds 0 addresses; a batch holds 1 to 100");
        let many = format!(r#"{{"wallets":[{}]}}"#, vec![format!("\"{wallet}\""); 101].join(","));
        assert_eq!(refuse(&many), "wallets holds 101 addresses; a batch holds 1 to 100");
        assert!(refuse(&format!(r#"{{"wallets":["{wallet}","0x12"]}}"#)).starts_with("wallets[1]: "));
    }
}
