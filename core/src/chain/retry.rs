//! When a JSON-RPC request is worth sending again, and how long to wait first: the one retry
//! policy of the edge API and the relayer. Nothing here sends or waits: the caller counts its
//! attempts, asks [`wait_before_retry`] after each one that failed, and sleeps or gives up.
//!
//! | what came back | sent again | wait before attempt n + 1 | attempts in all |
//! |---|---|---|---|
//! | HTTP 429 | any request: the provider refused it before processing it | its `Retry-After`, else 250 ms × 2ⁿ⁻¹ | [`ATTEMPTS`] (3) |
//! | HTTP 5xx | reads only: a send may have been taken | the same | 3 |
//! | a JSON-RPC error saying the node has not seen the block the read names ([`crate::chain::rpc::is_unseen_block`]: a load balancer's backend behind the head) | reads only | 500 ms × 2ⁿ⁻¹ | [`UNSEEN_BLOCK_ATTEMPTS`] (4: 3.5 s of waits, two blocks of a 2-second chain) |
//!
//! A `Retry-After` longer than [`LONGEST_WAIT`] is not waited for: the refusal is answered, and
//! names it. Anything else (a lost answer, a timeout, another HTTP status or JSON-RPC error) is
//! answered as it is: a lost send is the relayer's nonce machinery's to resolve, never resent.

use core::time::Duration;

use alloy_json_rpc::ResponsePacket;

use crate::chain::rpc::is_unseen_block;

/// Attempts of one request that the provider answers with HTTP 429 or 5xx.
pub const ATTEMPTS: u32 = 3;
/// The first wait after a 429 or 5xx without `Retry-After`; doubled for each attempt after.
pub const FIRST_BACKOFF: Duration = Duration::from_millis(250);
/// The longest `Retry-After` waited for; a longer one is passed on to the client.
pub const LONGEST_WAIT: Duration = Duration::from_secs(3);
/// Attempts of a read at a block the node has not seen yet.
pub const UNSEEN_BLOCK_ATTEMPTS: u32 = 4;
/// The first wait before reading again at a block the node had not seen; doubled after.
pub const FIRST_UNSEEN_BLOCK_WAIT: Duration = Duration::from_millis(500);

/// What sending a request does, as far as sending it again goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// A read: sending it twice is harmless.
    Read,
    /// A transaction sent (`eth_sendRawTransaction`, `eth_sendTransaction`): sent again only
    /// when the provider refused it before processing it (429).
    Send,
}

/// JSON-RPC methods that send a transaction.
const SEND_METHODS: [&str; 2] = ["eth_sendRawTransaction", "eth_sendTransaction"];

impl Effect {
    /// The effect of a request of `methods` (a batch's, or one): a send if any of them sends.
    pub fn of_methods<'a>(methods: impl IntoIterator<Item = &'a str>) -> Self {
        if methods.into_iter().any(|method| SEND_METHODS.contains(&method)) { Self::Send } else { Self::Read }
    }
}

/// How an attempt failed that a later attempt may not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// An HTTP status other than 2xx, with the wait its `Retry-After` asked for ([`retry_after`]).
    Http {
        /// The HTTP status.
        status: u16,
        /// The `Retry-After`, if the provider sent one.
        retry_after: Option<Duration>,
    },
    /// A JSON-RPC error saying the node has not seen the block the request names.
    UnseenBlock,
}

impl Failure {
    /// The failure a JSON-RPC answer holds: [`Failure::UnseenBlock`] when one of its errors says
    /// the node has not seen the block asked for.
    pub fn of_answer(answer: &ResponsePacket) -> Option<Self> {
        answer
            .iter_errors()
            .any(|error| is_unseen_block(error.code, &error.message))
            .then_some(Self::UnseenBlock)
    }
}

/// True when HTTP `status` says the provider refused the request before processing it (429,
/// too many requests): nothing was done, so even a transaction may be sent again.
pub const fn refused_unprocessed(status: u16) -> bool {
    status == 429
}

/// The wait a `Retry-After` header asks for, in its delay-seconds form (`"1"`); the HTTP-date
/// form is not read.
pub fn retry_after(header: &str) -> Option<Duration> {
    header.trim().parse::<u64>().ok().map(Duration::from_secs)
}

/// The wait before attempt `attempt + 1` of a request with `effect` whose attempt `attempt`
/// (counted from 1) failed with `failure`; `None`: give up and answer the failure.
pub fn wait_before_retry(effect: Effect, attempt: u32, failure: Failure) -> Option<Duration> {
    match failure {
        Failure::Http { status, retry_after } => {
            let may =
                refused_unprocessed(status) || (effect == Effect::Read && (500..=599).contains(&status));
            if !may || attempt >= ATTEMPTS {
                return None;
            }
            let wait = retry_after.unwrap_or_else(|| doubled(FIRST_BACKOFF, attempt));
            (wait <= LONGEST_WAIT).then_some(wait)
        }
        Failure::UnseenBlock => (effect == Effect::Read && attempt < UNSEEN_BLOCK_ATTEMPTS)
            .then(|| doubled(FIRST_UNSEEN_BLOCK_WAIT, attempt)),
    }
}

/// `first` doubled for each attempt after the first.
fn doubled(first: Duration, attempt: u32) -> Duration {
    first.saturating_mul(1 << attempt.saturating_sub(1).min(16))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const fn http(status: u16, retry_after: Option<u64>) -> Failure {
        Failure::Http {
            status,
            retry_after: match retry_after {
                Some(seconds) => Some(Duration::from_secs(seconds)),
                None => None,
            },
        }
    }

    /// The edge API's schedule, which the relayer now shares: 250 ms, then 500 ms, three
    /// attempts; a `Retry-After` up to 3 s is waited for as given.
    #[test]
    fn rate_limits_and_server_errors() {
        let waits: Vec<_> =
            (1..=3).map(|attempt| wait_before_retry(Effect::Read, attempt, http(503, None))).collect();
        assert_eq!(waits, [Some(Duration::from_millis(250)), Some(Duration::from_millis(500)), None]);
        assert_eq!(wait_before_retry(Effect::Read, 1, http(429, Some(1))), Some(Duration::from_secs(1)));
        assert_eq!(wait_before_retry(Effect::Read, 2, http(429, Some(3))), Some(Duration::from_secs(3)));
        assert_eq!(wait_before_retry(Effect::Read, 1, http(429, Some(4))), None, "passed on to the client");
        assert_eq!(wait_before_retry(Effect::Read, 3, http(429, Some(1))), None);
        for status in [400, 401, 404, 413] {
            assert_eq!(wait_before_retry(Effect::Read, 1, http(status, None)), None, "{status}");
        }
    }

    /// A transaction goes again only after a 429: a gateway's 502 or 504 may come after the node
    /// took it, and a lost answer is never a failure here.
    #[test]
    fn sends_only_after_a_refusal_before_processing() {
        assert_eq!(wait_before_retry(Effect::Send, 1, http(429, Some(1))), Some(Duration::from_secs(1)));
        assert_eq!(wait_before_retry(Effect::Send, 1, http(429, None)), Some(FIRST_BACKOFF));
        for status in [500, 502, 503, 504] {
            assert_eq!(wait_before_retry(Effect::Send, 1, http(status, None)), None, "{status}");
        }
        assert_eq!(wait_before_retry(Effect::Send, 1, Failure::UnseenBlock), None);
        assert_eq!(Effect::of_methods(["eth_sendRawTransaction"]), Effect::Send);
        assert_eq!(Effect::of_methods(["eth_blockNumber", "eth_sendTransaction"]), Effect::Send);
        assert_eq!(Effect::of_methods(["eth_call", "eth_estimateGas", "eth_getBalance"]), Effect::Read);
    }

    #[test]
    fn unseen_blocks_are_read_again_four_times_in_3_5_seconds() {
        let waits: Vec<_> =
            (1..=4).map(|attempt| wait_before_retry(Effect::Read, attempt, Failure::UnseenBlock)).collect();
        let ms = Duration::from_millis;
        assert_eq!(waits, [Some(ms(500)), Some(ms(1_000)), Some(ms(2_000)), None]);
    }

    #[test]
    fn retry_after_headers() {
        assert_eq!(retry_after(" 2 "), Some(Duration::from_secs(2)));
        assert_eq!(retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
        assert_eq!(retry_after("-1"), None);
    }

    /// Every node's and provider's wording of a block it has not seen, in a JSON-RPC answer;
    /// other errors (a revert, a rate limit, a plain failure) are not.
    #[test]
    fn unseen_block_answers() {
        let answer = |code: i64, message: &str| -> ResponsePacket {
            serde_json::from_value(serde_json::json!(
                {"jsonrpc": "2.0", "id": 1, "error": {"code": code, "message": message}}
            ))
            .unwrap()
        };
        for (code, message) in [
            (-32000, "header not found"),
            (-32000, "header for hash not found"),
            (-32001, "header not found"),
            (-32001, "20434567 could not be found"),
            (-32000, "Block not found"),
            (-39001, "Unknown block"),
            (-32000, "block not found: 20434567"),
            (-32602, "Unknown block number"),
            (-32000, "request beyond head block: requested 20434567, head 20434565"),
            (-32000, "block range extends beyond current head block"),
            (-32602, "BlockOutOfRangeError: block height is 12 but requested was 14"),
        ] {
            assert_eq!(Failure::of_answer(&answer(code, message)), Some(Failure::UnseenBlock), "{message}");
        }
        for (code, message) in [
            (3, "execution reverted: header not found"),
            (-32000, "execution reverted"),
            (-32005, "limit exceeded"),
            (-32000, "out of gas"),
            (-32000, "nonce too low"),
            (-32001, "0xabc receipt could not be found"),
        ] {
            assert_eq!(Failure::of_answer(&answer(code, message)), None, "{message}");
        }
        let batch: ResponsePacket = serde_json::from_str(
            r#"[{"jsonrpc":"2.0","id":0,"result":"0x"},
                {"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"header not found"}}]"#,
        )
        .unwrap();
        assert_eq!(Failure::of_answer(&batch), Some(Failure::UnseenBlock));
    }

    proptest! {
        /// Whatever fails and however often, retrying ends within the bound and never waits
        /// more than the longest wait.
        #[test]
        fn retrying_ends(status in 100u16..600, retry_after in proptest::option::of(0u64..10),
                         send in any::<bool>(), unseen in any::<bool>()) {
            let effect = if send { Effect::Send } else { Effect::Read };
            let failure = if unseen { Failure::UnseenBlock } else { http(status, retry_after) };
            let mut attempt = 1;
            while let Some(wait) = wait_before_retry(effect, attempt, failure) {
                prop_assert!(wait <= LONGEST_WAIT);
                attempt += 1;
            }
            prop_assert!(attempt <= ATTEMPTS.max(UNSEEN_BLOCK_ATTEMPTS));
        }
    }
}
