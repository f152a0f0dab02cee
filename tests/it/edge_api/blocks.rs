//! `X-Block-Number` and `X-Block-Timestamp`: every `/api/v1` answer names the pinned block it
//! was read at, and a cached answer keeps the block it was read at, not the chain's latest.

use alloy::providers::Provider;
use kya_devchain::{Chain, seed::DemoData};
use kya_tests::edge_fixture::{Answer, EdgeClient};

use super::expect;

/// Number and timestamp of the chain's latest block.
async fn latest(chain: &Chain) -> (u64, u64) {
    let number = chain.provider().get_block_number().await.expect("a block number");
    (number, chain.latest_timestamp().await.expect("a latest block"))
}

fn block_of(answer: &Answer, path: &str) -> (u64, u64) {
    let header = |name: &str| -> u64 {
        answer
            .header(name)
            .unwrap_or_else(|| panic!("{path}: no {name} in {:?}", answer.headers))
            .parse()
            .unwrap_or_else(|error| panic!("{path}: {name} is not a number: {error}"))
    };
    (header("x-block-number"), header("x-block-timestamp"))
}

/// While the chain stands still, every endpoint (cached or not, hit or miss) names the latest
/// block; KYA's `checkedAt` is that block's timestamp; errors name no block.
pub(super) async fn every_answer_names_its_block(api: &EdgeClient, chain: &Chain, demo: &DemoData) {
    let block = latest(chain).await;
    let wallet = demo.agent(demo.roles.compliant).record.agent_wallet;
    let paths = [
        "/api/v1/stats".to_owned(),
        "/api/v1/stats/detailed".into(),
        "/api/v1/agents?page=2".into(),
        "/api/v1/agents/compliance".into(),
        "/api/v1/revenue/aggregate".into(),
        "/api/v1/agent/1".into(),
        "/api/v1/agent/1/lineage".into(),
        "/api/v1/agent/1/revenue".into(),
        format!("/api/v1/kya/{}", wallet.to_checksum(None)),
    ];
    for path in &paths {
        // Twice: the second answer of a cached endpoint comes from the Cache API.
        for _ in 0..2 {
            let answer = api.get(path).await;
            assert_eq!(answer.status, 200, "{path}: {}", answer.body);
            assert_eq!(block_of(&answer, path), block, "{path} ({:?})", answer.header("x-cache"));
        }
    }
    let kya = api.get(&paths[8]).await;
    assert_eq!(kya.body["checkedAt"], expect::time(block.1));
    let missing = api.get("/api/v1/agent/999").await;
    assert_eq!((missing.status, missing.header("x-block-number")), (404, None));
}

/// After a new block, a cached answer still names the block it was read at, and a fresh read
/// names the new one (KYA's `checkedAt` with it).
pub(super) async fn cached_answers_keep_their_block(api: &EdgeClient, chain: &Chain, demo: &DemoData) {
    let path = "/api/v1/agent/4";
    let before = latest(chain).await;
    // Read (or re-read) at the current block, then move the chain on by one block and a minute.
    let first = api.get(path).await;
    let read_at = block_of(&first, path);
    assert!(read_at.0 <= before.0, "{path} read at {read_at:?}, latest {before:?}");
    chain.set_next_timestamp(before.1 + 60).await.expect("the clock moves");
    chain.mine().await.expect("a block");
    let after = latest(chain).await;
    assert_eq!(after, (before.0 + 1, before.1 + 60));

    let cached = api.get(path).await;
    assert_eq!(cached.header("x-cache"), Some("HIT"));
    assert_eq!(block_of(&cached, path), read_at, "a cached answer keeps its block");

    let revenue = api.get("/api/v1/agent/4/revenue").await;
    assert_eq!(block_of(&revenue, "revenue"), after, "uncached revenue reads the new block");
    // A wallet never checked before: a cache miss, read at the new block.
    let wallet = demo.agent(demo.roles.reactivated).record.agent_wallet;
    let kya_path = format!("/api/v1/kya/{wallet:#x}");
    let kya = api.get(&kya_path).await;
    assert_eq!((kya.status, kya.header("x-cache")), (200, Some("MISS")));
    assert_eq!(block_of(&kya, &kya_path), after);
    assert_eq!(kya.body["checkedAt"], expect::time(after.1));
}
