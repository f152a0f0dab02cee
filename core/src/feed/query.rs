//! The filters of `GET /changes` and `GET /changes/stream`, and a page of the feed.

use std::collections::BTreeSet;

use alloy_primitives::Address;
use serde::{Deserialize, Serialize};

use crate::{
    Error, Result,
    api::query::{limit, parse_agent_id, parse_wallet},
    feed::{Cursor, Event, EventType, Finality},
};

/// The default number of events of a page.
pub const CHANGES_DEFAULT_LIMIT: u64 = 100;
/// The most events a page holds, however many are asked for.
pub const CHANGES_MAX_LIMIT: u64 = 1_000;
/// The most wallets, or agent ids, one filter names.
pub const MAX_FILTER_VALUES: usize = 100;

/// Which events a client follows, and from where.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChangesQuery {
    /// Events after this one; `None`: from the oldest the feed holds.
    pub after: Option<Cursor>,
    /// At most this many events (clamped to [`CHANGES_MAX_LIMIT`]).
    pub limit: u64,
    /// Any of these wallets (none: any wallet).
    pub wallets: BTreeSet<Address>,
    /// Any of these agents (none: any agent).
    pub agent_ids: BTreeSet<u64>,
    /// Any of these types (none: any type).
    pub types: BTreeSet<EventType>,
    /// Only `final` entries: each change once, once it is confirmed.
    pub final_only: bool,
}

impl ChangesQuery {
    /// Parses `after`, `limit`, `wallet`, `agentId`, `type` and `final`. `wallet`, `agentId`
    /// and `type` may each be repeated or given as a comma-separated list; the filters of
    /// different names must all match, the values of one name any. Other parameters are
    /// ignored; a repeated `after`, `limit` or `final` keeps its last value.
    pub fn parse<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<Self> {
        let mut query = Self { limit: CHANGES_DEFAULT_LIMIT, ..Self::default() };
        for (name, value) in pairs {
            match name {
                "after" => query.after = Some(Cursor::parse(value, "after")?),
                "limit" => query.limit = limit(value, CHANGES_MAX_LIMIT)?,
                "wallet" => {
                    for wallet in list(value) {
                        query.wallets.insert(parse_wallet(wallet)?);
                    }
                }
                "agentId" => {
                    for id in list(value) {
                        query.agent_ids.insert(parse_agent_id(id)?);
                    }
                }
                "type" => {
                    for kind in list(value) {
                        query.types.insert(kind.parse()?);
                    }
                }
                "final" => {
                    query.final_only = match value {
                        "true" => true,
                        "false" => false,
                        _ => {
                            return Err(Error::InvalidQuery {
                                name: "final",
                                reason: "must be true or false",
                            });
                        }
                    }
                }
                _ => {}
            }
        }
        if query.wallets.len() > MAX_FILTER_VALUES {
            return Err(Error::InvalidQuery { name: "wallet", reason: "names at most 100 wallets" });
        }
        if query.agent_ids.len() > MAX_FILTER_VALUES {
            return Err(Error::InvalidQuery { name: "agentId", reason: "names at most 100 agents" });
        }
        Ok(query)
    }

    /// The query string that asks for this query (`after=…&limit=…&wallet=…`, each filter's
    /// values as a comma-separated list; what is not set left out), for a client.
    pub fn to_query_string(&self) -> String {
        let mut parts = Vec::new();
        if let Some(after) = self.after {
            parts.push(format!("after={after}"));
        }
        parts.push(format!("limit={}", self.limit));
        let joined = |values: Vec<String>| values.join(",");
        if !self.wallets.is_empty() {
            parts.push(format!("wallet={}", joined(self.wallets.iter().map(ToString::to_string).collect())));
        }
        if !self.agent_ids.is_empty() {
            parts.push(format!(
                "agentId={}",
                joined(self.agent_ids.iter().map(ToString::to_string).collect())
            ));
        }
        if !self.types.is_empty() {
            parts.push(format!(
                "type={}",
                joined(self.types.iter().map(|kind| kind.as_str().to_owned()).collect())
            ));
        }
        if self.final_only {
            parts.push("final=true".to_owned());
        }
        parts.join("&")
    }

    /// Whether the filters select `event` (the cursor and the limit aside).
    pub fn matches(&self, event: &Event) -> bool {
        let change = &event.change;
        (!self.final_only || event.finality == Finality::Final)
            && (self.wallets.is_empty() || self.wallets.contains(&change.wallet))
            && (self.agent_ids.is_empty() || self.agent_ids.contains(&change.agent_id))
            && (self.types.is_empty() || self.types.contains(&change.kind))
    }
}

/// A page of the feed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// The events the filters selected, oldest first, at most the query's limit.
    pub events: Vec<Event>,
    /// Where the next page starts: the last event this page looked at, selected or not, so a
    /// filter that selects few events still moves on; the query's own cursor when there was
    /// nothing after it.
    pub next: Option<Cursor>,
}

/// The page of `query` from `entries`: the feed's entries from the query's cursor on, oldest
/// first, as far as the caller read them (a page ends at the limit, or where `entries` end).
pub fn page<'a>(entries: impl IntoIterator<Item = &'a Event>, query: &ChangesQuery) -> Page {
    let limit = usize::try_from(query.limit).unwrap_or(usize::MAX);
    let mut page = Page { events: Vec::new(), next: query.after };
    for event in entries {
        if query.after.is_some_and(|after| event.id <= after) {
            continue;
        }
        if page.events.len() == limit {
            break;
        }
        page.next = Some(event.id);
        if query.matches(event) {
            page.events.push(*event);
        }
    }
    page
}

/// The JSON of a page of `GET /api/v1/changes`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangesAnswer {
    /// The events the filters selected, oldest first.
    pub events: Vec<Event>,
    /// Where the next page starts ([`Page::next`]); `null` while the feed is empty.
    pub next: Option<Cursor>,
    /// Whether the feed holds events past `next`: false once the page reached the newest.
    pub more: bool,
}

/// Why a cursor cannot be served from what the feed holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unservable {
    /// Older than the oldest batch kept: events after it may have been dropped (410).
    Gone { oldest: u64 },
    /// Past the newest batch written: not a cursor this feed gave (400).
    Unknown { newest: u64 },
}

/// Whether the feed, holding batches `oldest..=newest` (`None`: none yet), can serve events
/// after `after`. Retention never drops the newest batch, so a client that has read everything
/// is never told its cursor is gone.
pub fn check_cursor(after: Option<Cursor>, held: Option<(u64, u64)>) -> Result<(), Unservable> {
    let Some(after) = after else { return Ok(()) };
    let (oldest, newest) = held.unwrap_or((1, 0));
    if after.batch > newest {
        Err(Unservable::Unknown { newest })
    } else if after.batch < oldest {
        Err(Unservable::Gone { oldest })
    } else {
        Ok(())
    }
}

fn list(value: &str) -> impl Iterator<Item = &str> {
    value.split(',').map(str::trim).filter(|part| !part.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        AgentStatus,
        feed::{Change, Detail, EventBlock, Standing},
    };
    use alloy_primitives::{B256, address};

    const A: Address = address!("0x70997970c51812dc3a010c7d01b50e0d17dc79c8");
    const B: Address = address!("0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc");

    fn event(
        batch: u64,
        index: u32,
        agent_id: u64,
        wallet: Address,
        kind: EventType,
        finality: Finality,
    ) -> Event {
        let change = Change {
            kind,
            agent_id,
            wallet,
            block: EventBlock { number: batch, hash: B256::ZERO, time: 1 },
            log: None,
            standing: Standing { is_registered: true, is_compliant: true, status: Some(AgentStatus::Active) },
            detail: Detail::None {},
        };
        let mut event = Event::provisional(Cursor { batch, index }, change);
        event.finality = finality;
        event
    }

    fn parse(query: &str) -> Result<ChangesQuery> {
        ChangesQuery::parse(
            query
                .split('&')
                .filter(|pair| !pair.is_empty())
                .map(|pair| pair.split_once('=').unwrap_or((pair, ""))),
        )
    }

    #[test]
    fn filters_parse_from_repeats_and_lists() {
        let query = parse(&format!(
            "after=4-2&limit=5000&wallet={A}&wallet={},{A}&agentId=3,9&agentId=3&type=agent.attested,agent.registered&final=true&other=x",
            B.to_string().to_lowercase()
        ))
        .unwrap();
        assert_eq!(query.after, Some(Cursor { batch: 4, index: 2 }));
        assert_eq!(query.limit, CHANGES_MAX_LIMIT, "clamped");
        assert_eq!(query.wallets, BTreeSet::from([A, B]));
        assert_eq!(query.agent_ids, BTreeSet::from([3, 9]));
        assert_eq!(query.types, BTreeSet::from([EventType::Attested, EventType::Registered]));
        assert!(query.final_only);
        assert_eq!(
            parse("").unwrap(),
            ChangesQuery { limit: CHANGES_DEFAULT_LIMIT, ..ChangesQuery::default() }
        );
    }

    #[test]
    fn a_query_asks_for_itself() {
        for text in [
            "limit=100",
            "after=4-2&limit=7&wallet=0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC,0x70997970C51812dc3A010C7d01b50e0d17dc79C8&agentId=3,9&type=agent.registered,agent.attested&final=true",
        ] {
            let query = parse(text).unwrap();
            assert_eq!(query.to_query_string(), text);
            assert_eq!(parse(&query.to_query_string()).unwrap(), query);
        }
    }

    #[test]
    fn bad_filters_are_refused_with_their_names() {
        let message = |query: &str| parse(query).unwrap_err().to_string();
        assert_eq!(message("final=yes"), "invalid query parameter 'final': must be true or false");
        assert_eq!(message("limit=0"), "invalid query parameter 'limit': must be a positive integer");
        assert_eq!(message("limit=-1"), "invalid query parameter 'limit': must be a positive integer");
        assert!(message("wallet=0x12").starts_with("invalid wallet '0x12'"));
        assert_eq!(message("agentId=0"), "invalid agent id '0': must be a positive integer");
        assert!(message("type=agent.x").starts_with("invalid query parameter 'type'"));
        assert!(message("after=abc").starts_with("invalid query parameter 'after'"));
        let many = (1..=101).map(|id| id.to_string()).collect::<Vec<_>>().join(",");
        assert_eq!(
            message(&format!("agentId={many}")),
            "invalid query parameter 'agentId': names at most 100 agents"
        );
        assert!(
            parse(&format!("agentId={}", (1..=100).map(|id| id.to_string()).collect::<Vec<_>>().join(",")))
                .is_ok()
        );
    }

    #[test]
    fn a_page_selects_in_order_and_moves_past_what_it_did_not_select() {
        let feed = [
            event(1, 0, 1, A, EventType::Registered, Finality::Provisional),
            event(1, 1, 2, B, EventType::Registered, Finality::Provisional),
            event(2, 0, 1, A, EventType::Attested, Finality::Provisional),
            event(3, 0, 1, A, EventType::Registered, Finality::Final),
            event(3, 1, 2, B, EventType::Registered, Finality::Final),
        ];
        let all = page(&feed, &parse("").unwrap());
        assert_eq!(all.events, feed.to_vec());
        assert_eq!(all.next, Some(Cursor { batch: 3, index: 1 }));

        let of_b = page(&feed, &parse(&format!("wallet={B}&limit=1")).unwrap());
        assert_eq!(of_b.events, vec![feed[1]]);
        assert_eq!(of_b.next, Some(Cursor { batch: 1, index: 1 }), "ends at the limit");
        let rest = page(&feed, &parse(&format!("wallet={B}&after=1-1")).unwrap());
        assert_eq!(rest.events, vec![feed[4]]);

        let finals = page(&feed, &parse("final=true&agentId=1").unwrap());
        assert_eq!(finals.events, vec![feed[3]]);
        let none = page(&feed, &parse("type=agent.compliance_changed&after=2-0").unwrap());
        assert_eq!(
            (none.events.len(), none.next),
            (0, Some(Cursor { batch: 3, index: 1 })),
            "moves on all the same"
        );
        let caught_up = page(&feed, &parse("after=3-1").unwrap());
        assert_eq!((caught_up.events.len(), caught_up.next), (0, Some(Cursor { batch: 3, index: 1 })));
    }

    #[test]
    fn cursors_outside_what_the_feed_holds() {
        let at = |batch| Some(Cursor { batch, index: 0 });
        assert_eq!(check_cursor(None, None), Ok(()));
        assert_eq!(check_cursor(at(1), None), Err(Unservable::Unknown { newest: 0 }));
        assert_eq!(check_cursor(at(5), Some((5, 9))), Ok(()));
        assert_eq!(check_cursor(at(9), Some((5, 9))), Ok(()));
        assert_eq!(check_cursor(at(4), Some((5, 9))), Err(Unservable::Gone { oldest: 5 }));
        assert_eq!(check_cursor(at(10), Some((5, 9))), Err(Unservable::Unknown { newest: 9 }));
    }
}
