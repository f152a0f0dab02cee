//! The block headers a run asks for, each once: the head's, the index's own block's and the
//! window's anchor at its start (is the index's block still the chain's?), then whatever the
//! feed needs (blocks whose logs came without a time, an unsettled entry's block).

use std::collections::{BTreeMap, BTreeSet};

use alloy_primitives::B256;
use kya_core::BlockRef;

use crate::{Result, rpc::Rpc};

/// Block headers a run asked for: each number with its block and hash, `None` where the node
/// has no such block.
#[derive(Default)]
pub(super) struct Headers(BTreeMap<u64, Option<(BlockRef, B256)>>);

impl Headers {
    /// Asks for the headers of `numbers` not asked yet, in one batch.
    pub(super) async fn ask(&mut self, rpc: &Rpc<'_>, numbers: BTreeSet<u64>) -> Result<()> {
        let numbers: Vec<u64> = numbers.into_iter().filter(|number| !self.0.contains_key(number)).collect();
        let found = rpc.headers(&numbers).await?;
        self.0.extend(numbers.into_iter().zip(found));
        Ok(())
    }

    pub(super) fn hash(&self, number: u64) -> Option<B256> {
        self.0.get(&number).copied().flatten().map(|(_, hash)| hash)
    }

    pub(super) fn time(&self, number: u64) -> Option<u64> {
        self.block(number).map(|block| block.timestamp)
    }

    pub(super) fn block(&self, number: u64) -> Option<BlockRef> {
        self.0.get(&number).copied().flatten().map(|(block, _)| block)
    }
}
