//! The change feed's events and their JSON (`docs/change-feed.md`).
//!
//! Over 500 lines with its tests: the code is 356 lines, every event and field of the feed's
//! JSON in one place; the tests pin that JSON.

use alloy_primitives::{Address, B256};
use serde::{Deserialize, Serialize};

use crate::{AgentStatus, Error, Result, feed::Cursor};

/// What changed about an agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum EventType {
    /// The agent was registered (`AgentRegistered`).
    #[serde(rename = "agent.registered")]
    Registered,
    /// Its status moved (`AgentSuspended`, `AgentReactivated`, `AgentRevoked`, `AgentTerminated`,
    /// or a correction where the registry's record disagrees with its logs).
    #[serde(rename = "agent.status_changed")]
    StatusChanged,
    /// It was attested (`ComplianceAttested`).
    #[serde(rename = "agent.attested")]
    Attested,
    /// Its attestation lapsed: the index's block time passed `lastAttestation` plus the validity
    /// period. Time makes it, not a transaction.
    #[serde(rename = "agent.attestation_expired")]
    AttestationExpired,
    /// It reported revenue (`RevenueReported`).
    #[serde(rename = "agent.revenue_reported")]
    RevenueReported,
    /// `isCompliant` flipped, whatever made it.
    #[serde(rename = "agent.compliance_changed")]
    ComplianceChanged,
    /// A correction: the chain no longer holds the registration the feed showed for this wallet
    /// (a reorganisation deeper than the feed's finality depth took it away, or gave its id to
    /// another wallet). Its standing is unregistered; `log` is `null`.
    #[serde(rename = "agent.unregistered")]
    Unregistered,
}

impl EventType {
    /// Every type, in the order the documentation lists them.
    pub const ALL: [Self; 7] = [
        Self::Registered,
        Self::StatusChanged,
        Self::Attested,
        Self::AttestationExpired,
        Self::RevenueReported,
        Self::ComplianceChanged,
        Self::Unregistered,
    ];

    /// The name in JSON, in the `type` filter and as the SSE `event:` field.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Registered => "agent.registered",
            Self::StatusChanged => "agent.status_changed",
            Self::Attested => "agent.attested",
            Self::AttestationExpired => "agent.attestation_expired",
            Self::RevenueReported => "agent.revenue_reported",
            Self::ComplianceChanged => "agent.compliance_changed",
            Self::Unregistered => "agent.unregistered",
        }
    }
}

impl core::str::FromStr for EventType {
    type Err = Error;

    fn from_str(name: &str) -> Result<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == name).ok_or(Error::InvalidQuery {
            name: "type",
            reason: "must be one of agent.registered, agent.status_changed, agent.attested, \
                     agent.attestation_expired, agent.revenue_reported, agent.compliance_changed, \
                     agent.unregistered",
        })
    }
}

/// How sure the feed is of a change. Every change is sent `provisional` first; once the setting's
/// depth of blocks has confirmed its block it is sent again `final` (naming the provisional entry
/// in `confirms`), or, if a reorganisation removed it first, `retracted` (naming it in
/// `retracts`). Never both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Finality {
    Provisional,
    Final,
    Retracted,
}

impl Finality {
    /// The name in JSON.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Provisional => "provisional",
            Self::Final => "final",
            Self::Retracted => "retracted",
        }
    }
}

/// An agent's KYA standing, as `GET /kya/:wallet` answers it at a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Standing {
    pub is_registered: bool,
    pub is_compliant: bool,
    /// `None` when no agent is registered (a registration a reorganisation removed).
    pub status: Option<AgentStatus>,
}

impl Standing {
    /// No agent.
    pub const UNREGISTERED: Self = Self { is_registered: false, is_compliant: false, status: None };
}

/// The block a change happened in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventBlock {
    pub number: u64,
    pub hash: B256,
    /// Unix seconds (rendered as ISO 8601 in JSON).
    #[serde(with = "iso_seconds")]
    pub time: u64,
}

/// The log a change was read from; `None` for what time or a correction made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventLog {
    pub transaction_hash: B256,
    /// The log's index in its block.
    pub log_index: u64,
}

/// What a change says beyond its type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Detail {
    /// `agent.status_changed`.
    Status { from: AgentStatus, to: AgentStatus },
    /// `agent.compliance_changed`.
    Compliance { from: bool, to: bool },
    /// `agent.attested`: the attestation's time.
    Attested {
        #[serde(rename = "attestedAt", with = "iso_seconds")]
        attested_at: u64,
    },
    /// `agent.attestation_expired`: the attestation that lapsed, and the last second it was
    /// current (`lastAttestation` plus the validity period).
    Expired {
        #[serde(rename = "lastAttestation", with = "iso_seconds")]
        last_attestation: u64,
        #[serde(rename = "validUntil", with = "iso_seconds")]
        valid_until: u64,
    },
    /// `agent.registered` and `agent.revenue_reported`: the log says it all (the report itself
    /// is at `/agent/:id/revenue`; its strings have no bound, so the feed does not carry them).
    None {},
}

/// One change of one agent, as the index derived it (no id or finality yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Change {
    #[serde(rename = "type")]
    pub kind: EventType,
    pub agent_id: u64,
    #[serde(serialize_with = "crate::api::checksum::serialize")]
    pub wallet: Address,
    pub block: EventBlock,
    pub log: Option<EventLog>,
    /// The agent's standing after the change.
    pub standing: Standing,
    #[serde(flatten)]
    pub detail: Detail,
}

/// An entry of the feed: a change with its place in the feed and its finality.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    /// This entry's cursor: `after=<id>` and `Last-Event-ID` resume after it.
    pub id: Cursor,
    pub finality: Finality,
    /// For `final`: the provisional entry it confirms.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub confirms: Option<Cursor>,
    /// For `retracted`: the provisional entry it withdraws. Its `standing` is then the agent's
    /// standing once the reorganisation was applied, not the withdrawn change's.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub retracts: Option<Cursor>,
    #[serde(flatten)]
    pub change: Change,
}

impl Event {
    /// A change as first seen.
    pub const fn provisional(id: Cursor, change: Change) -> Self {
        Self { id, finality: Finality::Provisional, confirms: None, retracts: None, change }
    }

    /// The confirmation of `provisional`, at `id`.
    pub const fn confirmation(id: Cursor, provisional: &Self) -> Self {
        Self {
            id,
            finality: Finality::Final,
            confirms: Some(provisional.id),
            retracts: None,
            change: provisional.change,
        }
    }

    /// The withdrawal of `provisional`, at `id`, with the agent's standing after the
    /// reorganisation.
    pub const fn retraction(id: Cursor, provisional: &Self, standing: Standing) -> Self {
        let mut change = provisional.change;
        change.standing = standing;
        Self { id, finality: Finality::Retracted, confirms: None, retracts: Some(provisional.id), change }
    }

    /// The entry's JSON, as `/changes`, the stream and webhooks send it.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("an event serialises")
    }

    /// `(wallet, block)` when this event shows its agent not compliant: the wallet lost
    /// compliance at that block, so its passes of that block or before are revoked. The standing
    /// an event states is the agent's after the change (after the reorganisation, for a
    /// retraction), so any event stating "not compliant" is a loss at its block, whatever its
    /// type or finality. The one statement of the rule every provider's follower applies (the
    /// Rust `PassVerifier`, the Python package's).
    pub const fn lost_compliance_at(&self) -> Option<(Address, u64)> {
        let change = &self.change;
        if change.standing.is_compliant { None } else { Some((change.wallet, change.block.number)) }
    }
}

// Reading events back (the index re-reads its feed's batches each run) goes through [`Flat`],
// not derived code: serde's `flatten` buffers the whole object into an intermediate tree and an
// untagged `Detail` tries each variant against it in turn, which was most of decoding an event
// (V8's profile of a steady run: about 1 ms of its 14).

impl<'de> Deserialize<'de> for Event {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> core::result::Result<Self, D::Error> {
        use serde::de::Error as _;
        let flat = Flat::deserialize(deserializer)?;
        let (id, finality) = match (flat.id, flat.finality) {
            (Some(id), Some(finality)) => (id, finality),
            (None, _) => return Err(D::Error::missing_field("id")),
            (_, None) => return Err(D::Error::missing_field("finality")),
        };
        Ok(Self { id, finality, confirms: flat.confirms, retracts: flat.retracts, change: flat.change() })
    }
}

impl<'de> Deserialize<'de> for Change {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> core::result::Result<Self, D::Error> {
        Ok(Flat::deserialize(deserializer)?.change())
    }
}

/// Every field an event's JSON may have, in one flat object: an [`Event`]'s own, its
/// [`Change`]'s and each [`Detail`]'s. Unknown fields are ignored, as the derived code did.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Flat {
    id: Option<Cursor>,
    finality: Option<Finality>,
    #[serde(default)]
    confirms: Option<Cursor>,
    #[serde(default)]
    retracts: Option<Cursor>,
    #[serde(rename = "type")]
    kind: EventType,
    agent_id: u64,
    wallet: Address,
    block: EventBlock,
    log: Option<EventLog>,
    standing: Standing,
    #[serde(default)]
    from: Option<Side>,
    #[serde(default)]
    to: Option<Side>,
    #[serde(default, deserialize_with = "iso_seconds::optional")]
    attested_at: Option<u64>,
    #[serde(default, deserialize_with = "iso_seconds::optional")]
    last_attestation: Option<u64>,
    #[serde(default, deserialize_with = "iso_seconds::optional")]
    valid_until: Option<u64>,
}

impl Flat {
    /// The change, its detail chosen as the untagged [`Detail`] chooses: the first variant,
    /// in declaration order, whose fields are all present with their types.
    fn change(&self) -> Change {
        let detail = match (self.from, self.to, self.attested_at, self.last_attestation, self.valid_until) {
            (Some(Side::Status(from)), Some(Side::Status(to)), ..) => Detail::Status { from, to },
            (Some(Side::Flag(from)), Some(Side::Flag(to)), ..) => Detail::Compliance { from, to },
            (_, _, Some(attested_at), ..) => Detail::Attested { attested_at },
            (_, _, None, Some(last_attestation), Some(valid_until)) => {
                Detail::Expired { last_attestation, valid_until }
            }
            _ => Detail::None {},
        };
        Change {
            kind: self.kind,
            agent_id: self.agent_id,
            wallet: self.wallet,
            block: self.block,
            log: self.log,
            standing: self.standing,
            detail,
        }
    }
}

/// A `from` or `to`: a status (`agent.status_changed`) or a flag (`agent.compliance_changed`).
#[derive(Clone, Copy)]
enum Side {
    Status(AgentStatus),
    Flag(bool),
}

impl<'de> Deserialize<'de> for Side {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> core::result::Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Side;

            fn expecting(&self, formatter: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                formatter.write_str("an agent status or a boolean")
            }

            fn visit_bool<E: serde::de::Error>(self, flag: bool) -> core::result::Result<Side, E> {
                Ok(Side::Flag(flag))
            }

            fn visit_str<E: serde::de::Error>(self, name: &str) -> core::result::Result<Side, E> {
                name.parse().map(Side::Status).map_err(E::custom)
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// Unix seconds as ISO 8601 in JSON.
mod iso_seconds {
    use serde::{Deserialize, Deserializer, Serializer, de::Error as _};

    pub(super) fn serialize<S: Serializer>(seconds: &u64, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&crate::api::time::iso8601(*seconds))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
        let text = String::deserialize(deserializer)?;
        crate::api::time::parse_iso8601(&text)
            .ok_or_else(|| D::Error::custom(format!("not an ISO 8601 time: {text}")))
    }

    /// An optional field's: absent or `null` is `None`.
    pub(super) fn optional<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
        #[derive(Deserialize)]
        struct Seconds(#[serde(deserialize_with = "deserialize")] u64);
        Ok(Option::<Seconds>::deserialize(deserializer)?.map(|Seconds(seconds)| seconds))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy_primitives::address;

    fn change(detail: Detail, kind: EventType) -> Change {
        Change {
            kind,
            agent_id: 7,
            wallet: address!("0x70997970c51812dc3a010c7d01b50e0d17dc79c8"),
            block: EventBlock { number: 120, hash: B256::repeat_byte(0xab), time: 1_700_000_000 },
            log: Some(EventLog { transaction_hash: B256::repeat_byte(0x01), log_index: 2 }),
            standing: Standing {
                is_registered: true,
                is_compliant: false,
                status: Some(AgentStatus::Suspended),
            },
            detail,
        }
    }

    #[test]
    fn an_event_renders_as_documented_and_reads_back() {
        let provisional = Event::provisional(
            Cursor { batch: 41, index: 3 },
            change(
                Detail::Status { from: AgentStatus::Active, to: AgentStatus::Suspended },
                EventType::StatusChanged,
            ),
        );
        let json: serde_json::Value = serde_json::from_str(&provisional.to_json()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "id": "41-3",
                "finality": "provisional",
                "type": "agent.status_changed",
                "agentId": 7,
                "wallet": "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
                "block": {
                    "number": 120,
                    "hash": format!("0x{}", "ab".repeat(32)),
                    "time": "2023-11-14T22:13:20.000Z",
                },
                "log": {"transactionHash": format!("0x{}", "01".repeat(32)), "logIndex": 2},
                "standing": {"isRegistered": true, "isCompliant": false, "status": "Suspended"},
                "from": "Active",
                "to": "Suspended",
            })
        );
        assert_eq!(serde_json::from_value::<Event>(json).unwrap(), provisional);

        let confirmed = Event::confirmation(Cursor { batch: 50, index: 0 }, &provisional);
        let json: serde_json::Value = serde_json::from_str(&confirmed.to_json()).unwrap();
        assert_eq!((json["finality"].as_str(), json["confirms"].as_str()), (Some("final"), Some("41-3")));
        assert_eq!(json["from"], "Active", "a confirmation repeats the change");
        assert_eq!(serde_json::from_value::<Event>(json).unwrap(), confirmed);

        let withdrawn =
            Event::retraction(Cursor { batch: 44, index: 1 }, &provisional, Standing::UNREGISTERED);
        let json: serde_json::Value = serde_json::from_str(&withdrawn.to_json()).unwrap();
        assert_eq!((json["finality"].as_str(), json["retracts"].as_str()), (Some("retracted"), Some("41-3")));
        assert_eq!(
            json["standing"],
            serde_json::json!({"isRegistered": false, "isCompliant": false, "status": null})
        );
        assert_eq!(serde_json::from_value::<Event>(json).unwrap(), withdrawn);
    }

    #[test]
    fn a_standing_not_compliant_is_a_loss_at_its_block_whatever_the_type_or_finality() {
        let wallet = address!("0x70997970c51812dc3a010c7d01b50e0d17dc79c8");
        let suspended = Event::provisional(
            Cursor { batch: 41, index: 3 },
            change(
                Detail::Status { from: AgentStatus::Active, to: AgentStatus::Suspended },
                EventType::StatusChanged,
            ),
        );
        assert_eq!(suspended.lost_compliance_at(), Some((wallet, 120)));
        let confirmed = Event::confirmation(Cursor { batch: 50, index: 0 }, &suspended);
        assert_eq!(confirmed.lost_compliance_at(), Some((wallet, 120)), "a confirmation repeats it");
        // A retraction states the standing after the reorganisation: no agent is not compliant.
        let withdrawn = Event::retraction(Cursor { batch: 44, index: 1 }, &suspended, Standing::UNREGISTERED);
        assert_eq!(withdrawn.lost_compliance_at(), Some((wallet, 120)));
        let restored =
            Standing { is_registered: true, is_compliant: true, status: Some(AgentStatus::Active) };
        let withdrawn = Event::retraction(Cursor { batch: 44, index: 2 }, &suspended, restored);
        assert_eq!(withdrawn.lost_compliance_at(), None, "compliant again once the block was undone");
        let mut attested = change(Detail::Attested { attested_at: 1_700_000_000 }, EventType::Attested);
        attested.standing = restored;
        assert_eq!(Event::provisional(Cursor { batch: 42, index: 0 }, attested).lost_compliance_at(), None);
    }

    #[test]
    fn each_detail_has_its_fields() {
        let render = |detail, kind| {
            let json: serde_json::Value = serde_json::from_str(
                &Event::provisional(Cursor { batch: 1, index: 0 }, change(detail, kind)).to_json(),
            )
            .unwrap();
            let event: Event = serde_json::from_value(json.clone()).unwrap();
            assert_eq!(event.change.detail, detail, "{json}");
            json
        };
        let json = render(Detail::Compliance { from: true, to: false }, EventType::ComplianceChanged);
        assert_eq!((json["from"].as_bool(), json["to"].as_bool()), (Some(true), Some(false)));
        let json = render(Detail::Attested { attested_at: 1_700_000_000 }, EventType::Attested);
        assert_eq!(json["attestedAt"], "2023-11-14T22:13:20.000Z");
        let json = render(
            Detail::Expired { last_attestation: 1_700_000_000, valid_until: 1_700_604_800 },
            EventType::AttestationExpired,
        );
        assert_eq!(
            (json["lastAttestation"].as_str(), json["validUntil"].as_str()),
            (Some("2023-11-14T22:13:20.000Z"), Some("2023-11-21T22:13:20.000Z"))
        );
        let json = render(Detail::None {}, EventType::RevenueReported);
        assert!(json.get("from").is_none() && json.get("attestedAt").is_none(), "{json}");
    }

    /// The hand-written reader picks details as the untagged `Detail` does, in any key order,
    /// ignoring fields it does not know, and names a missing field.
    #[test]
    fn events_read_back_in_any_order_with_the_details_the_untagged_enum_chose() {
        let event = Event::provisional(
            Cursor { batch: 9, index: 1 },
            change(
                Detail::Expired { last_attestation: 1_700_000_000, valid_until: 1_700_604_800 },
                EventType::AttestationExpired,
            ),
        );
        let mut json: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(&event.to_json()).unwrap();
        json.insert("extra".into(), serde_json::json!({"nested": [1, 2]}));
        // Keys written last to first (the map sorts them: `wallet` comes first, `agentId` last).
        let pairs: Vec<String> = json
            .iter()
            .rev()
            .map(|(key, value)| format!("{}:{value}", serde_json::to_string(key).unwrap()))
            .collect();
        let text = format!("{{{}}}", pairs.join(","));
        assert!(text.starts_with("{\"wallet\"") && text.contains("\"extra\""), "{text}");
        assert_eq!(serde_json::from_str::<Event>(&text).unwrap(), event);
        assert_eq!(serde_json::from_str::<Change>(&text).unwrap(), event.change);

        // A status beside a flag fits neither `Status` nor `Compliance`: no detail, as untagged.
        let mut mixed = json.clone();
        mixed.insert("from".into(), "Active".into());
        mixed.insert("to".into(), true.into());
        mixed.remove("lastAttestation");
        let read: Event = serde_json::from_value(mixed.into()).unwrap();
        assert_eq!(read.change.detail, Detail::None {});

        let mut unnamed = json;
        unnamed.remove("id");
        let error = serde_json::from_value::<Event>(unnamed.into()).unwrap_err().to_string();
        assert!(error.contains("missing field `id`"), "{error}");
    }

    #[test]
    fn type_names_round_trip_and_others_are_refused() {
        for kind in EventType::ALL {
            assert_eq!(kind.as_str().parse::<EventType>(), Ok(kind));
            assert_eq!(serde_json::to_value(kind).unwrap(), kind.as_str());
        }
        let error = "agent.deleted".parse::<EventType>().unwrap_err();
        assert!(error.is_bad_request());
        assert!(
            error.to_string().starts_with("invalid query parameter 'type': must be one of agent.registered")
        );
    }
}
