//! The services' OpenAPI documents as contracts: every response an end-to-end test receives is
//! checked against the operation the document gives its method and path (status, headers,
//! content type and body, the body with a JSON Schema 2020-12 validator), so a document that no
//! longer says what the code does fails the tests that exercise it.

use std::{
    collections::HashMap,
    sync::{Mutex, OnceLock},
};

use jsonschema::Validator;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};

use crate::repo_root;

/// One service's OpenAPI document, with its compiled schemas kept for reuse.
#[derive(Debug)]
pub struct Contract {
    name: &'static str,
    document: Value,
    /// The service answers `/x/` as `/x` (warp's routes do; the Worker's table does not).
    trailing_slash_is_ignored: bool,
    validators: Mutex<HashMap<String, std::sync::Arc<Validator>>>,
}

/// The edge API's document (`edge-api/openapi.json`).
pub fn edge() -> &'static Contract {
    static EDGE: OnceLock<Contract> = OnceLock::new();
    EDGE.get_or_init(|| Contract::load("edge API", "edge-api/openapi.json"))
}

/// The relayer's document (`relayer-daemon/openapi.json`).
pub fn relayer() -> &'static Contract {
    static RELAYER: OnceLock<Contract> = OnceLock::new();
    RELAYER.get_or_init(|| {
        let mut relayer = Contract::load("relayer", "relayer-daemon/openapi.json");
        relayer.trailing_slash_is_ignored = true;
        relayer
    })
}

/// What a test received, as the contract needs it.
#[derive(Debug, Clone, Copy)]
pub struct Received<'a> {
    /// The request's method, upper case.
    pub method: &'a str,
    /// The request's path, with or without a query.
    pub path: &'a str,
    pub status: u16,
    pub headers: &'a HeaderMap,
    pub body: &'a str,
}

impl Contract {
    /// Reads the document at `relative` (to the repository root).
    pub fn load(name: &'static str, relative: &str) -> Self {
        let path = repo_root().join(relative);
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
        let document =
            serde_json::from_str(&text).unwrap_or_else(|error| panic!("{relative}: not JSON: {error}"));
        Self { name, document, trailing_slash_is_ignored: false, validators: Mutex::default() }
    }

    /// The document as JSON.
    pub fn document(&self) -> &Value {
        &self.document
    }

    /// Panics, saying what differs, unless `received` is what the document promises.
    pub fn assert_conforms(&self, received: Received<'_>) {
        if let Err(why) = self.check(received) {
            panic!(
                "{} {} {} does not conform to the {} OpenAPI document: {why}\nheaders: {:?}\nbody: {}",
                received.method, received.path, received.status, self.name, received.headers, received.body
            );
        }
    }

    /// `Ok` when `received` is what the document promises, else why not.
    pub fn check(&self, received: Received<'_>) -> Result<(), String> {
        let mut path = received.path.split(['?', '#']).next().unwrap_or_default();
        if self.trailing_slash_is_ignored && path.len() > 1 {
            path = path.strip_suffix('/').unwrap_or(path);
        }
        let method = received.method.to_ascii_lowercase();
        if method == "head" && !received.body.is_empty() {
            return Err(format!("an answer to HEAD has a body: {}", received.body));
        }
        let Some((template, item)) = self.path_item(path) else {
            // No such path: a 404 (405 for other methods, 429 when limited), as an error body.
            return self.check_undocumented(received, &[404, 405, 429]);
        };
        let Some(operation) = item.get(&method) else {
            return self.check_undocumented(received, &[405, 429]);
        };
        let status = received.status.to_string();
        let response = self
            .response_of(operation, &status)
            .ok_or_else(|| format!("status {status} is not documented for {method} {template}"))?;
        self.check_headers(received.headers, response)?;
        let content_type =
            received.headers.get("content-type").and_then(|value| value.to_str().ok()).unwrap_or_default();
        let media = content_type.split(';').next().unwrap_or_default().trim();
        let Some(content) = response.get("content").and_then(Value::as_object) else {
            if !received.body.is_empty() {
                return Err(format!("{status} has no documented body, but one came: {}", received.body));
            }
            // HEAD is GET without the body: its `Content-Type` is the one GET's body would have.
            if method == "head" {
                let get = item.get("get").ok_or_else(|| format!("HEAD {template} without a GET"))?;
                let described = self.response_of(get, &status).and_then(|get| get.get("content"));
                if let Some(get_content) = described.and_then(Value::as_object)
                    && !get_content.contains_key(media)
                {
                    return Err(format!(
                        "HEAD answered content type {content_type:?}, GET documents {:?}",
                        get_content.keys()
                    ));
                }
            }
            return Ok(());
        };
        let Some(described) = content.get(media) else {
            return Err(format!(
                "content type {content_type:?} is not documented (only {:?})",
                content.keys()
            ));
        };
        if media == "application/json" {
            let schema = described.get("schema").ok_or("a JSON body without a schema")?;
            self.check_body(&format!("{method} {template} {status}"), schema, received.body)?;
        }
        // A compact JWS (a KYA pass): the body is one string, checked against its schema.
        if media == "application/jwt" {
            let schema = described.get("schema").ok_or("a JWT body without a schema")?;
            let as_json = Value::String(received.body.to_owned()).to_string();
            self.check_body(&format!("{method} {template} {status}"), schema, &as_json)?;
        }
        Ok(())
    }

    /// The response `operation` documents for `status` (exact, `4XX`-style, or `default`),
    /// its reference resolved.
    fn response_of<'a>(&'a self, operation: &'a Value, status: &str) -> Option<&'a Value> {
        let responses = &operation["responses"];
        let response = responses
            .get(status)
            .or_else(|| responses.get(format!("{}XX", &status[..1])))
            .or_else(|| responses.get("default"))?;
        Some(self.resolve(response))
    }

    /// The path item whose template (`{name}` segments match any one segment) matches `path`.
    fn path_item(&self, path: &str) -> Option<(&str, &Value)> {
        self.document["paths"].as_object()?.iter().find_map(|(template, item)| {
            let (mut wanted, mut given) = (template.split('/'), path.split('/'));
            loop {
                match (wanted.next(), given.next()) {
                    (None, None) => return Some((template.as_str(), item)),
                    (Some(name), Some(_)) if name.starts_with('{') => {}
                    (Some(literal), Some(segment)) if literal == segment => {}
                    _ => return None,
                }
            }
        })
    }

    fn check_undocumented(&self, received: Received<'_>, statuses: &[u16]) -> Result<(), String> {
        if !statuses.contains(&received.status) {
            return Err(format!("an undocumented method or path must answer one of {statuses:?}"));
        }
        if received.method == "HEAD" {
            return Ok(());
        }
        self.check_body("error", &json!({"$ref": "#/components/schemas/Error"}), received.body)
    }

    /// Every required header is there, and every documented header that is there fits its schema.
    fn check_headers(&self, headers: &HeaderMap, response: &Value) -> Result<(), String> {
        let Some(described) = response.get("headers").and_then(Value::as_object) else { return Ok(()) };
        for (name, header) in described {
            let header = self.resolve(header);
            let Some(value) = headers.get(name.as_str()) else {
                if header["required"] == true {
                    return Err(format!("required header {name} is missing"));
                }
                continue;
            };
            let text = value.to_str().map_err(|_| format!("header {name} is not text"))?;
            let schema = &header["schema"];
            // A header is text; an integer schema describes its digits.
            let instance = if schema["type"] == "integer" {
                text.parse::<u64>()
                    .map(Value::from)
                    .map_err(|_| format!("header {name}: {text:?} is no integer"))?
            } else {
                Value::from(text)
            };
            // Keyed by the schema too: one header name may have a schema per response
            // (`Access-Control-Allow-Methods` of `/relay` and of the relayer's other paths).
            let validator = self.validator(&format!("header {name}: {schema}"), schema)?;
            if let Some(error) = validator.iter_errors(&instance).next() {
                return Err(format!("header {name}: {text:?}: {error}"));
            }
        }
        Ok(())
    }

    fn check_body(&self, key: &str, schema: &Value, body: &str) -> Result<(), String> {
        let instance: Value =
            serde_json::from_str(body).map_err(|error| format!("the body is not JSON ({error}): {body}"))?;
        self.validate(key, schema, &instance)
    }

    /// `Ok` when `instance` fits `schema` (whose references resolve in this document); `key`
    /// names the schema in messages and in the cache of compiled schemas.
    pub fn validate(&self, key: &str, schema: &Value, instance: &Value) -> Result<(), String> {
        let validator = self.validator(key, schema)?;
        let errors: Vec<String> = validator
            .iter_errors(instance)
            .take(5)
            .map(|error| format!("{error} at {}", error.instance_path()))
            .collect();
        if errors.is_empty() { Ok(()) } else { Err(format!("body: {}", errors.join("; "))) }
    }

    /// A validator of `schema`, whose `#/components/...` references resolve in this document.
    fn validator(&self, key: &str, schema: &Value) -> Result<std::sync::Arc<Validator>, String> {
        let mut validators = self.validators.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(validator) = validators.get(key) {
            return Ok(validator.clone());
        }
        let rooted = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "components": self.document["components"],
            "allOf": [schema],
        });
        let validator =
            jsonschema::validator_for(&rooted).map_err(|error| format!("schema of {key}: {error}"))?;
        let validator = std::sync::Arc::new(validator);
        validators.insert(key.to_owned(), validator.clone());
        Ok(validator)
    }

    /// `value` itself, or what its `$ref` (`#/...` in this document) points at; a reference to
    /// nothing fails the test (`kya_core::api::openapi_testing`, the services' unit tests' rule).
    pub fn resolve<'a>(&'a self, value: &'a Value) -> &'a Value {
        kya_core::api::openapi_testing::resolved(&self.document, value)
    }
}
