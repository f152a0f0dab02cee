//! `kya watch`: follows the change feed (docs/change-feed.md), one line per event (the event's
//! JSON with `--json`), resuming where the `--state` file says it stopped: pages until caught up,
//! then the stream (or, with `--poll`, a page every few seconds).

use std::{path::Path, time::Duration};

use anyhow::{Context, Result};
use kya_core::feed::{ChangesQuery, Cursor, Detail, Event};

use super::{args::Watch, settings::Settings};
use crate::ChangeFollower;

/// Runs the watch until it is stopped (or, with `--once`, until it has caught up).
pub(crate) async fn run(settings: &Settings, watch: &Watch) -> Result<i32> {
    let mut query = query(watch)?;
    if query.after.is_none()
        && let Some(state) = &watch.state
    {
        query.after = saved(state)?;
    }
    let api = settings.api()?;
    let mut follower = match watch.poll {
        Some(secs) => ChangeFollower::new(api, query, Duration::from_secs(secs.max(1))),
        None => ChangeFollower::streaming(api, query),
    };
    loop {
        let event = if watch.once {
            match follower.try_next().await? {
                Some(event) => event,
                None => break,
            }
        } else {
            follower.next().await?
        };
        println!("{}", if settings.json { event.to_json() } else { line(&event) });
        if let (Some(state), Some(position)) = (&watch.state, follower.position()) {
            save(state, position)?;
        }
    }
    if let (Some(state), Some(position)) = (&watch.state, follower.position()) {
        save(state, position)?;
    }
    Ok(0)
}

/// The feed's query from the options, validated as the API validates it (the same messages).
fn query(watch: &Watch) -> Result<ChangesQuery> {
    let mut pairs: Vec<(&str, &str)> = Vec::new();
    pairs.extend(watch.wallet.iter().map(|wallet| ("wallet", wallet.as_str())));
    pairs.extend(watch.agent.iter().map(|id| ("agentId", id.as_str())));
    pairs.extend(watch.kind.iter().map(|kind| ("type", kind.as_str())));
    if watch.final_only {
        pairs.push(("final", "true"));
    }
    if let Some(after) = &watch.after {
        pairs.push(("after", after.as_str()));
    }
    let mut query = ChangesQuery::parse(pairs)?;
    query.limit = kya_core::feed::CHANGES_MAX_LIMIT;
    Ok(query)
}

/// The cursor a state file holds (none when the file does not exist yet).
fn saved(state: &Path) -> Result<Option<Cursor>> {
    match std::fs::read_to_string(state) {
        Ok(text) => Ok(Some(
            Cursor::parse(text.trim(), "after")
                .with_context(|| format!("{} holds no event id", state.display()))?,
        )),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(error).with_context(|| format!("reading {}", state.display())),
    }
}

/// Writes the cursor whole or not at all (a new file renamed over the old).
fn save(state: &Path, position: Cursor) -> Result<()> {
    let fresh = state.with_extension("new");
    std::fs::write(&fresh, format!("{position}\n"))
        .with_context(|| format!("writing {}", fresh.display()))?;
    std::fs::rename(&fresh, state).with_context(|| format!("writing {}", state.display()))
}

/// `41-3 provisional agent.status_changed agent 7 0x7099…79C8 block 120: Active → Suspended`.
pub(crate) fn line(event: &Event) -> String {
    let change = &event.change;
    let detail = match change.detail {
        Detail::Status { from, to } => format!(": {from} → {to}"),
        Detail::Compliance { from, to } => format!(": compliant {from} → {to}"),
        Detail::Attested { attested_at } => {
            format!(": attested at {}", kya_core::api::time::iso8601(attested_at))
        }
        Detail::Expired { valid_until, .. } => {
            format!(": valid until {}", kya_core::api::time::iso8601(valid_until))
        }
        Detail::None {} => String::new(),
    };
    let refers = match (event.confirms, event.retracts) {
        (Some(id), _) => format!(" (confirms {id})"),
        (_, Some(id)) => format!(" (retracts {id})"),
        _ => String::new(),
    };
    format!(
        "{} {} {} agent {} {} block {}{detail}{refers}",
        event.id,
        event.finality.as_str(),
        change.kind.as_str(),
        change.agent_id,
        change.wallet,
        change.block.number
    )
}
