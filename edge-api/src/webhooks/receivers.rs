//! The operators' receivers, named in `wrangler.toml` (`WEBHOOKS`), and the delivery settings
//! (`WEBHOOK_*`).
//!
//! A receiver is a name, a URL, the name of the Worker secret that holds its signing key, and a
//! filter written as `/api/v1/changes`' query (`wallet`, `agentId`, `type`, `final`), parsed by
//! the same `kya_core::feed::ChangesQuery`, so a receiver selects exactly what that page would.
//! The key itself never sits in `wrangler.toml`: `secret` names a binding set with
//! `wrangler secret put` (or `.dev.vars` / `--var` under `wrangler dev`). No message here quotes
//! a secret's value or a receiver's URL (which may carry a token).

use kya_core::{
    feed::ChangesQuery,
    standard_webhooks::{SECRET_PREFIX, decode_secret},
};
use serde::Deserialize;
use worker::Env;

/// The var naming the receivers: a JSON array (a string, as `--var` passes it) or the same
/// array as TOML tables (`[[vars.WEBHOOKS]]`).
pub(crate) const VAR: &str = "WEBHOOKS";

/// The filter names a receiver may use: `/changes`' filters, without its paging.
const FILTER_NAMES: [&str; 4] = ["wallet", "agentId", "type", "final"];

/// What `WEBHOOKS` must be, said when it is not.
const SHAPE: &str =
    "WEBHOOKS must be a list of receivers, each {name, url, secret, filter} with string values";

/// Longest receiver name: it names a Durable Object and appears in logs.
const MAX_NAME: usize = 64;

/// One receiver as configured.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
struct Configured {
    name: String,
    url: String,
    secret: String,
    #[serde(default)]
    filter: String,
}

/// A receiver, checked.
#[derive(Debug, Clone)]
pub(crate) struct Receiver {
    /// Its name: the Durable Object that delivers to it, its dead letters, its logs.
    pub(crate) name: String,
    /// Where events are POSTed. Never logged.
    pub(crate) url: String,
    /// The binding (a Worker secret) holding its signing key.
    pub(crate) secret_binding: String,
    /// What it receives.
    pub(crate) filter: ChangesQuery,
}

impl Receiver {
    /// Its signing key, read from its secret binding; the error names the binding, never the
    /// value.
    pub(crate) fn key(&self, env: &Env) -> Result<Vec<u8>, String> {
        let text = env
            .secret(&self.secret_binding)
            .map(|secret| secret.to_string())
            .or_else(|_| env.var(&self.secret_binding).map(|var| var.to_string()))
            .map_err(|_| {
                format!(
                    "webhook receiver {}: its secret {} is not set (wrangler secret put {}, or .dev.vars under wrangler dev)",
                    self.name, self.secret_binding, self.secret_binding
                )
            })?;
        decode_secret(&text).map_err(|error| {
            format!("webhook receiver {}: {}", self.name, error.describe(&self.secret_binding))
        })
    }
}

/// The receivers `WEBHOOKS` names (none when it is unset or empty), each with its key present
/// and valid: a receiver that could not sign stops the outlet, so nothing is handed on unsigned
/// or skipped.
pub(crate) fn from_env(env: &Env) -> Result<Vec<Receiver>, String> {
    let value = worker::js_sys::Reflect::get(env.as_ref(), &VAR.into()).unwrap_or_default();
    if value.is_undefined() || value.is_null() {
        return Ok(Vec::new());
    }
    let configured: Vec<Configured> = match value.as_string() {
        Some(text) if text.trim().is_empty() => return Ok(Vec::new()),
        // Neither error is quoted: a parser's message may quote a value, and a value may be a
        // key pasted in the wrong place.
        Some(text) => serde_json::from_str(&text)
            .map_err(|error| format!("{SHAPE} (line {}, column {})", error.line(), error.column()))?,
        None => serde_wasm_bindgen::from_value(value).map_err(|_| SHAPE.to_owned())?,
    };
    let receivers = check(configured)?;
    for receiver in &receivers {
        receiver.key(env)?;
    }
    Ok(receivers)
}

/// The receiver named `name`, if configured.
pub(crate) fn named(env: &Env, name: &str) -> Result<Receiver, String> {
    from_env(env)?
        .into_iter()
        .find(|receiver| receiver.name == name)
        .ok_or_else(|| format!("webhook receiver {name} is no longer configured in {VAR}"))
}

/// Checks every receiver: a name of `[a-z0-9_-]`, unique; an `http(s)` URL; a secret that is a
/// binding's name (not a key pasted in); a filter of `/changes`' names.
fn check(configured: Vec<Configured>) -> Result<Vec<Receiver>, String> {
    let mut receivers: Vec<Receiver> = Vec::with_capacity(configured.len());
    for Configured { name, url, secret, filter } in configured {
        let valid_name = !name.is_empty()
            && name.len() <= MAX_NAME
            && name
                .bytes()
                .all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || b"-_".contains(&byte));
        if !valid_name {
            return Err(format!(
                "{VAR}: a receiver's name must be 1 to {MAX_NAME} of a-z, 0-9, - and _ (got {name:?})"
            ));
        }
        if receivers.iter().any(|other| other.name == name) {
            return Err(format!("{VAR}: two receivers are named {name}"));
        }
        let scheme_ok = worker::Url::parse(&url)
            .is_ok_and(|parsed| matches!(parsed.scheme(), "http" | "https") && parsed.host().is_some());
        if !scheme_ok {
            return Err(format!("{VAR}: receiver {name}: url must be an http(s) URL"));
        }
        let is_binding_name = !secret.is_empty()
            && secret.len() <= MAX_NAME
            && !secret.starts_with(SECRET_PREFIX)
            && secret.bytes().all(|byte| byte.is_ascii_uppercase() || byte.is_ascii_digit() || byte == b'_');
        if !is_binding_name {
            // Never quoted: it may be the key itself, pasted where its name belongs.
            return Err(format!(
                "{VAR}: receiver {name}: secret must name a Worker secret (A-Z, 0-9, _), such as WEBHOOK_SECRET_{}, set with wrangler secret put; the key itself does not belong in wrangler.toml",
                name.to_ascii_uppercase().replace('-', "_")
            ));
        }
        let filter =
            parse_filter(&filter).map_err(|error| format!("{VAR}: receiver {name}: filter: {error}"))?;
        receivers.push(Receiver { name, url, secret_binding: secret, filter });
    }
    Ok(receivers)
}

/// A filter as `/changes` takes it (`type=agent.status_changed&final=true`); its other
/// parameters (`after`, `limit`) have no meaning here and are refused.
fn parse_filter(filter: &str) -> Result<ChangesQuery, String> {
    let parsed = worker::Url::parse(&format!("http://filter/?{}", filter.trim().trim_start_matches('?')))
        .map_err(|error| error.to_string())?;
    let pairs: Vec<(String, String)> = parsed.query_pairs().into_owned().collect();
    if let Some((name, _)) = pairs.iter().find(|(name, _)| !FILTER_NAMES.contains(&name.as_str())) {
        return Err(format!("unknown parameter {name:?} (wallet, agentId, type and final filter)"));
    }
    ChangesQuery::parse(pairs.iter().map(|(name, value)| (name.as_str(), value.as_str())))
        .map_err(|error| error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kya_core::feed::EventType;

    fn configured(name: &str, secret: &str, filter: &str) -> Configured {
        Configured {
            name: name.to_owned(),
            url: "https://hooks.example/kya?token=t".to_owned(),
            secret: secret.to_owned(),
            filter: filter.to_owned(),
        }
    }

    #[test]
    fn receivers_parse_with_changes_filters() {
        let receivers = check(vec![
            configured("ops", "WEBHOOK_SECRET_OPS", "type=agent.compliance_changed&final=true"),
            configured("all", "WEBHOOK_SECRET_ALL", ""),
        ])
        .unwrap();
        assert_eq!(receivers[0].filter.types, [EventType::ComplianceChanged].into());
        assert!(receivers[0].filter.final_only);
        assert_eq!(
            receivers[1].filter,
            ChangesQuery { limit: receivers[1].filter.limit, ..Default::default() }
        );
    }

    #[test]
    fn bad_receivers_are_refused_without_quoting_secrets() {
        let refused = |receiver: Configured| check(vec![receiver]).unwrap_err();
        let pasted = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwg7duQoLFbaY=";
        let error = refused(configured("ops", pasted, ""));
        assert!(error.contains("must name a Worker secret") && !error.contains(pasted), "{error}");
        let error = refused(configured("ops", "lowercase-key-pasted-here", ""));
        assert!(!error.contains("lowercase-key-pasted-here"), "{error}");
        assert!(refused(configured("Ops!", "S", "")).contains("name must be"));
        assert!(refused(configured("ops", "S", "after=1-0")).contains("unknown parameter \"after\""));
        assert!(refused(configured("ops", "S", "type=agent.x")).contains("invalid query parameter 'type'"));
        let mut ftp = configured("ops", "S", "");
        ftp.url = "ftp://hooks.example/".to_owned();
        let error = refused(ftp);
        assert!(error.contains("http(s) URL") && !error.contains("hooks.example"), "{error}");
        let twice = check(vec![configured("a", "S", ""), configured("a", "T", "")]).unwrap_err();
        assert_eq!(twice, "WEBHOOKS: two receivers are named a");
    }
}
