//! What a relay record holds (its status, its transactions, its outcome) and the reads of
//! records: by row, by relay id, by request, by any of its hashes, and the retry lookup.
//!
//! Over 500 lines with its tests: the code is 526 lines (the record, and the one statement that
//! reads it with its transactions, which every read here shares), and its tests follow it.

use super::{
    Store,
    codec::{Text, optional},
    parse_wei,
    schema::{OPEN, WITH_THE_NODE},
    sql::{Row, Sql, Value, args},
};
use crate::error::Result;
pub use crate::rules::status::{Outcome, RelayStatus};
use alloy::primitives::{Address, B256, Bytes, U256};
use kya_core::api::{
    relayer_view::{RelayView, SentTransaction},
    time::iso8601,
};

/// What a transaction of a relay does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxKind {
    /// `execute` of the request (the first send or a fee replacement).
    Relay,
    /// A zero-value self-transfer cancelling the relayer nonce.
    Cancel,
}

impl TxKind {
    /// The text kept in the store and shown by the lookups.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Relay => "relay",
            Self::Cancel => "cancel",
        }
    }
}

/// A relay's signed transaction, recorded just before it is submitted ([`super::Store::mark_sent`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sending {
    /// The relay's row id.
    pub id: i64,
    /// The transaction's nonce on the key's account.
    pub relayer_nonce: u64,
    /// Its hash.
    pub tx_hash: B256,
    /// The latest block when it was signed.
    pub block: u64,
    /// When it is recorded (Unix seconds).
    pub now: u64,
    /// The first record for a relay handed off to this daemon: it is recorded only while no
    /// transaction is recorded for the relay, so that a daemon that read it unsent before
    /// another sent it does not send it again.
    pub handed_off_first: bool,
}

/// One transaction sent for a relay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentTx {
    /// Its hash.
    pub hash: B256,
    /// What it does.
    pub kind: TxKind,
    /// Its max fee per gas.
    pub max_fee_wei: u128,
    /// Its priority fee per gas.
    pub priority_fee_wei: u128,
    /// The latest block when it was sent.
    pub sent_block: Option<u64>,
    /// When it was sent (Unix seconds).
    pub sent_at: u64,
}

/// What a relay reserves before it is sent.
#[derive(Debug, Clone)]
pub struct NewRelay {
    /// The request's signer.
    pub signer: Address,
    /// The request's forwarder nonce.
    pub forwarder_nonce: U256,
    /// The request's EIP-712 digest: with the signature, what makes a retry "the same".
    pub digest: B256,
    /// The request's signature.
    pub signature: Bytes,
    /// The request's deadline (Unix seconds; 0: none).
    pub deadline: u64,
    /// The calldata of `execute`, kept so a stuck transaction can be sent again.
    pub input: Bytes,
    /// The client it is counted against: its IPv4 address or IPv6 /48
    /// ([`kya_core::api::client_ip::relay_client_of`]).
    pub client_ip: String,
    /// Gas limit of the transaction the relayer will send.
    pub gas_limit: u64,
    /// Max fee per gas of that transaction.
    pub max_fee_wei: u128,
    /// Priority fee per gas of that transaction.
    pub priority_fee_wei: u128,
    /// The L1 data fee the reservation adds to the gas, on OP Stack chains (0 elsewhere): kept
    /// in every later worst case of the relay, its fee replacements' and its cancellation's.
    pub l1_fee_wei: u128,
    /// The lanes (relayer keys) it may go to, in pool order: [`Store::reserve`] picks the one with
    /// the fewest open relays ([`crate::rules::lanes::least_busy`]).
    pub lanes: Vec<Address>,
}

/// A reservation made by [`Store::reserve`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    /// Row id of the relay record.
    pub id: i64,
    /// The relay id clients see (random, stable across replacements).
    pub relay_id: String,
    /// Wei reserved: gas limit × max fee, plus the L1 data fee reserved, the most the
    /// transaction can cost.
    pub reserved_wei: u128,
    /// The lane (relayer key) that sends it.
    pub lane: Address,
}

/// Why a reservation was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The budget's remainder is below the worst-case cost.
    Budget,
    /// What pacing has opened of the budget so far is below the worst-case cost; more opens at
    /// `opens_at` (Unix seconds).
    Slice {
        /// When the next slice opens.
        opens_at: u64,
    },
    /// The signer's share of the budget cannot cover the worst-case cost.
    SignerShare,
    /// The client's share of the budget cannot cover the worst-case cost.
    ClientShare,
    /// The same (signer, nonce) is already accepted: a replay.
    Duplicate,
}

/// Why [`Store::replace`] recorded nothing (so nothing may be submitted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplaceRefusal {
    /// The relay is no longer open: settled or dropped meanwhile.
    Closed,
    /// The budget's remainder cannot cover the growth of the relay's worst case.
    Budget,
    /// The relay's signer's share cannot cover it.
    SignerShare,
    /// The relay's client's share cannot cover it.
    ClientShare,
}

/// What a mined transaction of a relay says, for [`Store::settle`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settlement {
    /// The mined transaction's hash.
    pub tx_hash: B256,
    /// `gasUsed × effectiveGasPrice`, plus the receipt's L1 data fee on OP Stack chains.
    pub cost_wei: u128,
    /// How the relay ended.
    pub outcome: Outcome,
    /// The block it is in.
    pub block_number: Option<u64>,
    /// Gas it used.
    pub gas_used: Option<u64>,
    /// The registry's revert reason, when its call failed.
    pub revert_reason: Option<String>,
}

impl Settlement {
    /// A settlement with only a cost and an outcome (the store's own tests).
    pub fn of(tx_hash: B256, cost_wei: u128, outcome: Outcome) -> Self {
        Self { tx_hash, cost_wei, outcome, block_number: None, gas_used: None, revert_reason: None }
    }
}

/// A relay record, as kept on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayRecord {
    /// Row id.
    pub id: i64,
    /// The relay id clients see.
    pub relay_id: String,
    /// The request's signer.
    pub signer: Address,
    /// The request's forwarder nonce.
    pub forwarder_nonce: U256,
    /// The request's EIP-712 digest, if recorded (records of earlier versions lack it).
    pub digest: Option<B256>,
    /// The request's signature, if recorded.
    pub signature: Option<Bytes>,
    /// The request's deadline (Unix seconds; 0: none).
    pub deadline: u64,
    /// The calldata of `execute`, if recorded (and not yet dropped by retention).
    pub input: Option<Bytes>,
    /// Where the relay stands.
    pub status: RelayStatus,
    /// The lane (relayer key) that sends its transactions; `None` only in a store written before
    /// lanes, until a daemon gives it its first key.
    pub lane: Option<Address>,
    /// The relayer-account nonce of its transactions (on its lane's key).
    pub relayer_nonce: Option<u64>,
    /// The current transaction hash (the latest sent, or the one mined).
    pub tx_hash: Option<B256>,
    /// Every transaction sent for it, oldest first.
    pub txs: Vec<SentTx>,
    /// Gas limit of the relay's transactions.
    pub gas_limit: u64,
    /// Max fee per gas of the latest transaction.
    pub max_fee_wei: u128,
    /// Priority fee per gas of the latest transaction.
    pub priority_fee_wei: u128,
    /// Wei reserved.
    pub reserved_wei: u128,
    /// The part of `reserved_wei` held for the L1 data fee (OP Stack chains; 0 elsewhere).
    pub l1_fee_wei: u128,
    /// Wei actually paid (`gasUsed × effectiveGasPrice`, plus any L1 data fee), once settled.
    pub cost_wei: Option<u128>,
    /// The block of the mined transaction.
    pub block_number: Option<u64>,
    /// Gas the mined transaction used.
    pub gas_used: Option<u64>,
    /// The registry's revert reason, for `call_failed`.
    pub revert_reason: Option<String>,
    /// Why it was dropped or failed, for the record.
    pub error: Option<String>,
    /// When it was accepted (Unix seconds).
    pub created_at: u64,
    /// When its first transaction was sent.
    pub sent_at: Option<u64>,
    /// When it last changed.
    pub updated_at: Option<u64>,
    /// When it ended.
    pub settled_at: Option<u64>,
}

impl RelayRecord {
    /// The relay as the lookups show it (and the webhooks deliver it): ids, status, hashes,
    /// outcome and times.
    pub fn view(&self) -> RelayView {
        let transactions: Vec<SentTransaction> = self
            .txs
            .iter()
            .map(|tx| SentTransaction {
                tx_hash: tx.hash,
                kind: tx.kind.as_str().to_owned(),
                max_fee_per_gas: U256::from(tx.max_fee_wei),
                max_priority_fee_per_gas: U256::from(tx.priority_fee_wei),
                sent_at: iso8601(tx.sent_at),
            })
            .collect();
        let tx_hash = self.tx_hash;
        let previous_tx_hashes =
            transactions.iter().map(|tx| tx.tx_hash).filter(|hash| Some(*hash) != tx_hash).collect();
        RelayView {
            relay_id: self.relay_id.clone(),
            status: self.status.public(),
            from: self.signer,
            nonce: self.forwarder_nonce,
            tx_hash,
            previous_tx_hashes,
            transactions,
            relayer_nonce: self.relayer_nonce,
            block_number: self.block_number,
            gas_used: self.gas_used.map(U256::from),
            cost_wei: self.cost_wei.filter(|_| self.settled_at.is_some()).map(U256::from),
            reserved_wei: Some(U256::from(self.reserved_wei)),
            revert_reason: self.revert_reason.clone(),
            error: self.error.clone(),
            deadline: (self.deadline != 0).then_some(self.deadline),
            created_at: Some(iso8601(self.created_at)),
            sent_at: self.sent_at.map(iso8601),
            updated_at: self.updated_at.map(iso8601),
            settled_at: self.settled_at.map(iso8601),
        }
    }
}

/// A relay transaction sent again at the same nonce, for [`Store::replace`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replacement {
    /// The new transaction's hash.
    pub tx_hash: B256,
    /// A fee replacement of `execute`, or the cancellation.
    pub kind: TxKind,
    /// Its max fee per gas.
    pub max_fee_wei: u128,
    /// Its priority fee per gas.
    pub priority_fee_wei: u128,
    /// The latest block when it is sent.
    pub sent_block: u64,
}

const RECORD_COLUMNS: &str = "id, relay_id, signer, forwarder_nonce, digest, signature, deadline, input,
    status, relayer_nonce, tx_hash, gas_limit, max_fee_wei, priority_fee_wei, reserved_wei, cost_wei,
    block_number, gas_used, revert_reason, error, created_at, sent_at, updated_at, settled_at, l1_fee_wei,
    lane";

/// How many columns [`RECORD_COLUMNS`] names ([`RawRecord::read`] reads them by index; the
/// test below counts them).
const RECORD_COLUMN_COUNT: usize = 26;

impl Store {
    /// Relays still open that were created at or before `created_by`: what the reconciler looks
    /// at.
    pub fn open_since(&self, created_by: u64) -> Result<Vec<RelayRecord>> {
        self.records_where(&format!("status IN {OPEN} AND created_at <= ?1"), args![created_by as i64])
    }

    /// Relays whose transaction is with the node (sent, replaced or being cancelled): what the
    /// follower watches.
    pub fn in_the_pool(&self) -> Result<Vec<RelayRecord>> {
        self.records_where(&format!("status IN {WITH_THE_NODE}"), &[])
    }

    /// Relays whose transaction at relayer nonce `nonce` (on any key) is with the node: what
    /// may hold that nonce in the node's pool.
    pub fn in_the_pool_at(&self, nonce: u64) -> Result<Vec<RelayRecord>> {
        self.records_where(&format!("status IN {WITH_THE_NODE} AND relayer_nonce = ?1"), args![nonce as i64])
    }

    /// The relay with row id `id`.
    pub fn relay(&self, id: i64) -> Result<Option<RelayRecord>> {
        Ok(self.records_where("id = ?1", args![id])?.pop())
    }

    /// The relay clients know as `relay_id`.
    pub fn relay_by_id(&self, relay_id: &str) -> Result<Option<RelayRecord>> {
        Ok(self.records_where("relay_id = ?1", args![relay_id])?.pop())
    }

    /// The latest relay of the request (`signer`, forwarder `nonce`).
    pub fn relay_by_request(&self, signer: Address, nonce: U256) -> Result<Option<RelayRecord>> {
        Ok(self
            .records_where("signer = ?1 AND forwarder_nonce = ?2", args![signer.text(), nonce.text()])?
            .pop())
    }

    /// The relay that sent the transaction `tx_hash` (any of its hashes).
    pub fn relay_by_hash(&self, tx_hash: B256) -> Result<Option<RelayRecord>> {
        Ok(self
            .records_where(
                "tx_hash = ?1 OR id IN (SELECT relay FROM relay_txs WHERE tx_hash = ?1)",
                args![tx_hash.text()],
            )?
            .pop())
    }

    /// The relay holding this very signed request (same signer, nonce, digest and signature),
    /// if it is in flight or ran: a retry is answered with it.
    pub fn held(
        &self,
        signer: Address,
        nonce: U256,
        digest: B256,
        signature: &Bytes,
    ) -> Result<Option<RelayRecord>> {
        self.with(|connection| held_record(connection, signer, nonce, digest, signature))
    }

    /// Every relay record, oldest first.
    pub fn records(&self) -> Result<Vec<RelayRecord>> {
        self.records_where("1 = 1", &[])
    }

    fn records_where(&self, condition: &str, values: &[Value]) -> Result<Vec<RelayRecord>> {
        self.with(|connection| read_records(connection, condition, values))
    }
}

/// The columns of a relay's transaction, after [`RECORD_COLUMNS`] in [`read_records`]' rows.
const TX_COLUMNS: &str = "t.tx_hash, t.kind, t.max_fee_wei, t.priority_fee_wei, t.sent_block, t.sent_at";

/// The relays matching `condition`, oldest first, with their transactions, read on `connection`
/// (or inside a transaction of the caller's).
///
/// One statement, a relay's row joined to its transactions' rows: on PostgreSQL a statement
/// reads one snapshot even in READ COMMITTED, so a relay and its transactions are always as one
/// commit left them (two statements could show a replacement's transaction beside the status
/// before it). Not a REPEATABLE READ transaction around two statements: its two extra round
/// trips cost PostgreSQL a fifth to two fifths of its accepted relays under the cluster
/// bench's polling (measured A/B). SQLite's statement reads one snapshot too.
/// [`Store::held`] in the caller's transaction: the latest relay of this very signed request,
/// if it is live.
pub(super) fn held_record(
    sql: &mut impl Sql,
    signer: Address,
    nonce: U256,
    digest: B256,
    signature: &Bytes,
) -> Result<Option<RelayRecord>> {
    Ok(read_records(
        sql,
        "signer = ?1 AND forwarder_nonce = ?2 AND digest = ?3 AND signature = ?4",
        args![signer.text(), nonce.text(), digest.text(), signature.text()],
    )?
    .pop()
    .filter(|record| record.status.is_live()))
}

pub(super) fn read_records(
    sql: &mut impl Sql,
    condition: &str,
    values: &[Value],
) -> Result<Vec<RelayRecord>> {
    // The condition is written against `relays` alone (its `tx_hash` is the relay's), so it
    // selects the relays in a subquery the transactions are joined to.
    let rows = sql.query(
        &format!(
            "SELECT r.*, {TX_COLUMNS}
             FROM (SELECT {RECORD_COLUMNS} FROM relays WHERE {condition}) AS r
             LEFT JOIN relay_txs AS t ON t.relay = r.id
             ORDER BY r.id, t.rowid"
        ),
        values,
    )?;
    let mut records: Vec<RelayRecord> = Vec::new();
    for row in rows {
        // A relay's columns repeat on each of its transactions' rows: read at its first.
        let id: i64 = row.get(0)?;
        if records.last().is_none_or(|record| record.id != id) {
            records.push(RawRecord::read(&row)?.into_record()?);
        }
        let record = records.last_mut().expect("pushed above");
        // A relay with no transaction yet has one row, whose transaction columns are NULL.
        let Some(hash) = row.get::<Option<String>>(RECORD_COLUMN_COUNT)? else {
            continue;
        };
        let (kind, max_fee, priority_fee): (String, String, String) = (
            row.get(RECORD_COLUMN_COUNT + 1)?,
            row.get(RECORD_COLUMN_COUNT + 2)?,
            row.get(RECORD_COLUMN_COUNT + 3)?,
        );
        record.txs.push(SentTx {
            hash: B256::from_text(&hash, "transaction hash")?,
            kind: if kind == "cancel" { TxKind::Cancel } else { TxKind::Relay },
            max_fee_wei: parse_wei(&max_fee)?,
            priority_fee_wei: parse_wei(&priority_fee)?,
            sent_block: row.get::<Option<i64>>(RECORD_COLUMN_COUNT + 4)?.map(|block| block as u64),
            sent_at: row.get::<i64>(RECORD_COLUMN_COUNT + 5)? as u64,
        });
    }
    Ok(records)
}

/// A `relays` row as the database gives it, before its text is parsed.
struct RawRecord {
    id: i64,
    relay_id: String,
    signer: String,
    forwarder_nonce: String,
    digest: Option<String>,
    signature: Option<String>,
    deadline: i64,
    input: Option<String>,
    status: String,
    relayer_nonce: Option<i64>,
    tx_hash: Option<String>,
    gas_limit: i64,
    max_fee_wei: String,
    priority_fee_wei: String,
    reserved_wei: String,
    cost_wei: Option<String>,
    block_number: Option<i64>,
    gas_used: Option<i64>,
    revert_reason: Option<String>,
    error: Option<String>,
    created_at: i64,
    sent_at: Option<i64>,
    updated_at: Option<i64>,
    settled_at: Option<i64>,
    l1_fee_wei: String,
    lane: Option<String>,
}

impl RawRecord {
    /// Reads the columns of [`RECORD_COLUMNS`], in its order.
    fn read(row: &Row) -> Result<Self> {
        Ok(Self {
            id: row.get(0)?,
            relay_id: row.get(1)?,
            signer: row.get(2)?,
            forwarder_nonce: row.get(3)?,
            digest: row.get(4)?,
            signature: row.get(5)?,
            deadline: row.get(6)?,
            input: row.get(7)?,
            status: row.get(8)?,
            relayer_nonce: row.get(9)?,
            tx_hash: row.get(10)?,
            gas_limit: row.get(11)?,
            max_fee_wei: row.get(12)?,
            priority_fee_wei: row.get(13)?,
            reserved_wei: row.get(14)?,
            cost_wei: row.get(15)?,
            block_number: row.get(16)?,
            gas_used: row.get(17)?,
            revert_reason: row.get(18)?,
            error: row.get(19)?,
            created_at: row.get(20)?,
            sent_at: row.get(21)?,
            updated_at: row.get(22)?,
            settled_at: row.get(23)?,
            l1_fee_wei: row.get(24)?,
            lane: row.get(25)?,
        })
    }

    fn into_record(self) -> Result<RelayRecord> {
        let unsigned = |value: i64| value as u64;
        Ok(RelayRecord {
            id: self.id,
            relay_id: self.relay_id,
            signer: Address::from_text(&self.signer, "signer")?,
            forwarder_nonce: U256::from_text(&self.forwarder_nonce, "forwarder nonce")?,
            digest: optional(self.digest.as_deref(), "digest")?,
            signature: optional(self.signature.as_deref(), "signature")?,
            deadline: unsigned(self.deadline),
            input: optional(self.input.as_deref(), "calldata")?,
            status: RelayStatus::parse(&self.status)?,
            lane: optional(self.lane.as_deref(), "lane")?,
            relayer_nonce: self.relayer_nonce.map(unsigned),
            tx_hash: optional(self.tx_hash.as_deref(), "transaction hash")?,
            txs: Vec::new(),
            gas_limit: unsigned(self.gas_limit),
            max_fee_wei: parse_wei(&self.max_fee_wei)?,
            priority_fee_wei: parse_wei(&self.priority_fee_wei)?,
            reserved_wei: parse_wei(&self.reserved_wei)?,
            l1_fee_wei: parse_wei(&self.l1_fee_wei)?,
            cost_wei: self.cost_wei.as_deref().map(parse_wei).transpose()?,
            block_number: self.block_number.map(unsigned),
            gas_used: self.gas_used.map(unsigned),
            revert_reason: self.revert_reason,
            error: self.error,
            created_at: unsigned(self.created_at),
            sent_at: self.sent_at.map(unsigned),
            updated_at: self.updated_at.map(unsigned),
            settled_at: self.settled_at.map(unsigned),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_columns_are_counted_right() {
        assert_eq!(RECORD_COLUMNS.split(',').count(), RECORD_COLUMN_COUNT);
        assert_eq!(TX_COLUMNS.split(',').count(), 6);
    }
}
