//! Facts that other languages hold copies of, checked against their one source in core: a kind
//! added to the change feed, or renamed, fails here until every copy names it. (The registry's
//! revert reasons are tied to the contract in `contracts::registry_reverts`; the Worker's
//! `wrangler.toml` defaults to its code in `kya-edge-api`'s `config` tests.)

use std::collections::BTreeSet;

use kya_core::feed::EventType;
use kya_tests::repo_root;
use serde_json::Value;

/// The feed's kinds as core names them.
fn kinds() -> BTreeSet<String> {
    EventType::ALL.iter().map(|kind| kind.as_str().to_owned()).collect()
}

/// Every `agent.<name>` in `text`.
fn kinds_in(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '.' || c == '_'))
        .filter(|word| word.starts_with("agent.") && word.len() > "agent.".len())
        .map(str::to_owned)
        .collect()
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo_root().join(path)).unwrap_or_else(|error| panic!("{path}: {error}"))
}

/// `text` from the first line containing `start` through the first line after it containing
/// `end` (that line included).
fn between(text: &str, start: &str, end: &str) -> String {
    let lines: Vec<&str> = text.lines().skip_while(|line| !line.contains(start)).collect();
    assert!(!lines.is_empty(), "no line with {start:?}");
    let last = lines.iter().skip(1).position(|line| line.contains(end)).map_or(lines.len(), |at| at + 2);
    lines[..last].join("\n")
}

#[test]
fn the_feeds_kinds_are_the_same_in_every_copy() {
    let expected = kinds();
    assert_eq!(expected.len(), EventType::ALL.len());
    let copies = [
        ("core/npm/changes.d.ts", between(&read("core/npm/changes.d.ts"), "export type ChangeType", ";")),
        ("edge-api/public/app.js", between(&read("edge-api/public/app.js"), "const CHANGE_TYPES = [", "];")),
        (
            "client/src/cli/args.rs (kya watch --type)",
            between(&read("client/src/cli/args.rs"), "Only events of this type", "#[arg"),
        ),
    ];
    for (copy, text) in copies {
        assert_eq!(kinds_in(&text), expected, "{copy}");
    }
    let document: Value = serde_json::from_str(&read("edge-api/openapi.json")).expect("the OpenAPI document");
    let schema = &document["components"]["schemas"]["ChangeType"]["enum"];
    let listed: BTreeSet<String> = schema
        .as_array()
        .expect("ChangeType's enum")
        .iter()
        .map(|kind| kind.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(listed, expected, "edge-api/openapi.json, ChangeType");
}

#[test]
fn a_copy_missing_a_kind_is_seen() {
    let short = "export type ChangeType =\n  | 'agent.registered'\n  | 'agent.attested';";
    assert_ne!(kinds_in(&between(short, "export type ChangeType", ";")), kinds());
}
