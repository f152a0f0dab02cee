//! A relay's first store call: whether the very signed request is held already (stage 3), its
//! count against its client's hourly limit (stage 4) and the count of its signer's requests
//! (stage 6, read only), in one transaction. They were three calls, each a round trip to
//! PostgreSQL (and on SQLite a turn at the one connection), for every request; the checks
//! between them (the client's verdict, the signature) need nothing of the store, so the reads
//! can go with the count. The checks still answer in their stages' order.

use alloy::primitives::{Address, B256, Bytes, U256};

use super::{
    Store,
    codec::Text,
    limits::{
        COUNT_IN_WINDOW, RATE_WINDOW_SECS, RateKind, count_if_under, count_if_under_at_once, count_in_window,
        rate_lock, recorded,
    },
    prepared::bind,
    records::held_record,
    schema::LIVE,
    sql::{TextRows, args},
};
use crate::error::{Error, Result};

/// The signed request a relay is checked for, as stage 3 knows it.
#[derive(Debug, Clone)]
pub struct SignedRequest {
    pub signer: Address,
    pub nonce: U256,
    pub digest: B256,
    pub signature: Bytes,
}

/// What [`Store::admit`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admission {
    /// A live relay holds this very signed request (stage 3): nothing was counted.
    pub held: bool,
    /// Counted against its client's hourly limit (stage 4); false when the limit was reached,
    /// or the request is held.
    pub client_counted: bool,
    /// The signer's requests counted in the last hour (stage 6), this one not among them.
    pub signer_hits: u32,
}

impl Store {
    /// Stages 3, 4 and 6 of a relay's checks in one transaction: whether a live relay holds
    /// `request` (as [`Store::held`] finds it: the request's latest relay, if live), else one
    /// count for `client` if fewer than `per_client` were counted in the last hour (as
    /// [`Store::hit`]), and the signer's count (as [`Store::hits`]). On PostgreSQL one round
    /// trip: `BEGIN`, the client's lock, [`ADMIT_AT_ONCE`], the signer's count and `COMMIT`.
    pub fn admit(
        &self,
        request: &SignedRequest,
        client: &str,
        per_client: u32,
        now: u64,
    ) -> Result<Admission> {
        let signer = request.signer.text();
        self.with(|connection| {
            let locks = [rate_lock(RateKind::Ip, client)];
            if connection.is_postgres() {
                let horizon = now.saturating_sub(RATE_WINDOW_SECS) as i64;
                let values = args![
                    RateKind::Ip.as_str(),
                    client,
                    horizon,
                    now as i64,
                    i64::from(per_client),
                    signer.as_str(),
                    request.nonce.text(),
                    request.digest.text(),
                    request.signature.text()
                ];
                let signer_count = args![RateKind::Signer.as_str(), signer.as_str(), horizon];
                let rows = connection.transaction_at_once(
                    &locks,
                    &[bind(&ADMIT_AT_ONCE, values)?, bind(COUNT_IN_WINDOW, signer_count)?],
                )?;
                return admission_of(&rows);
            }
            let mut tx = connection.transaction(&locks)?;
            let SignedRequest { signer: from, nonce, digest, signature } = request;
            let held = held_record(&mut tx, *from, *nonce, *digest, signature)?.is_some();
            let client_counted = !held && count_if_under(&mut tx, RateKind::Ip, client, per_client, now)?;
            let signer_hits = count_in_window(&mut tx, RateKind::Signer, &signer, now)?;
            tx.commit()?;
            Ok(Admission { held, client_counted, signer_hits })
        })
    }
}

/// [`Store::admit`]'s stages 3 and 4 on PostgreSQL, as one statement (`?1` to `?5` the
/// client's count as [`count_if_under_at_once`] takes it, then `?6` signer, `?7` forwarder
/// nonce, `?8` digest and `?9` signature): `held` is [`held_record`]'s relay (the request's
/// latest, if live), and the client's event is recorded only when there is none. One row: the
/// count, 1 if recorded (else 0), and whether the request is held (`t` or `f`).
static ADMIT_AT_ONCE: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "WITH latest AS (SELECT status FROM relays WHERE signer = ?6 AND forwarder_nonce = ?7 AND digest = ?8
                             AND signature = ?9 ORDER BY id DESC LIMIT 1),
             held AS (SELECT 1 FROM latest WHERE status IN {LIVE}),
             {}
         SELECT n, (SELECT COUNT(*) FROM recorded), EXISTS (SELECT 1 FROM held) FROM counted",
        count_if_under_at_once("AND NOT EXISTS (SELECT 1 FROM held)")
    )
});

/// [`Admission`] from the batch's rows: [`ADMIT_AT_ONCE`]'s, then the signer's count.
fn admission_of(rows: &[TextRows]) -> Result<Admission> {
    let cell = |statement: usize, column: usize| {
        rows.get(statement)
            .and_then(|rows| rows.first())
            .and_then(|row| row.get(column).cloned().flatten())
            .ok_or_else(|| {
                Error::Store(format!("a relay's admission returned no value {statement}.{column}"))
            })
    };
    let held = match cell(0, 2)?.as_str() {
        "t" => true,
        "f" => false,
        other => return Err(Error::Store(format!("a relay's admission read held as {other:?}"))),
    };
    let signer_hits = cell(1, 0)?;
    Ok(Admission {
        held,
        client_counted: recorded(&rows[..1])?,
        signer_hits: signer_hits
            .parse()
            .map_err(|_| Error::Store(format!("a signer's count read as {signer_hits:?}")))?,
    })
}
