//! The body of `POST /api/v1/kya/verify` (INTERFACE.md section 6): the parts of the request a
//! provider received, as JSON. Anything not of this shape is a 400 that says what is wrong; a
//! body of the right shape whose signature fails is a 200 with `"verified": false` instead.

use base64::{
    Engine,
    alphabet::STANDARD,
    engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig},
};
use serde::Deserialize;
use serde_json::Value;

use crate::{Error, Result};

/// The largest body accepted, in bytes: the forwarded request's own body is at most 3/4 of it.
pub(crate) const MAX_BODY_BYTES: usize = 1 << 20;

/// Base64 as a provider may have written it: padded or not, and with bits past the last byte
/// set or not (they carry nothing). The document's pattern admits exactly what this decodes.
const LENIENT_BASE64: GeneralPurpose = GeneralPurpose::new(
    &STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true),
);

/// A verification request, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct VerifyBody {
    pub(crate) method: String,
    pub(crate) url: String,
    /// Header fields by lowercase name; a field sent several times is joined by `", "` (RFC 9421
    /// 2.1), as a list of values in the JSON.
    pub(crate) headers: Vec<(String, String)>,
    /// The forwarded request's body, decoded from base64.
    pub(crate) body: Option<Vec<u8>>,
    pub(crate) label: Option<String>,
    /// The host the provider serves (`host[:port]`), required: a provider that rebuilt `url`
    /// from the request's own `Host` would otherwise accept a request signed for another host.
    pub(crate) authority: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    method: String,
    url: String,
    headers: serde_json::Map<String, Value>,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    label: Option<String>,
    #[serde(default)]
    authority: Option<String>,
}

/// Parses `text`; every refusal names what to fix.
pub(crate) fn parse(text: &str) -> Result<VerifyBody> {
    if text.len() > MAX_BODY_BYTES {
        return Err(bad(format!("the body is {} bytes; at most {MAX_BODY_BYTES} are accepted", text.len())));
    }
    let raw: Raw = serde_json::from_str(text).map_err(|error| {
        bad(format!(
            "the body must be a JSON object {{method, url, headers, authority, body?, label?}}: {error}"
        ))
    })?;
    if raw.method.trim().is_empty() {
        return Err(bad("method must not be empty".into()));
    }
    if raw.url.trim().is_empty() {
        return Err(bad("url must be the absolute URL the request was sent to".into()));
    }
    let mut headers = Vec::with_capacity(raw.headers.len());
    for (name, value) in raw.headers {
        let value = match value {
            Value::String(text) => text,
            Value::Array(values) => values
                .iter()
                .map(|value| value.as_str().map(str::trim))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| bad(format!("headers.{name} must be a string or a list of strings")))?
                .join(", "),
            _ => return Err(bad(format!("headers.{name} must be a string or a list of strings"))),
        };
        headers.push((name.to_ascii_lowercase(), value));
    }
    for required in ["signature-input", "signature"] {
        if !headers.iter().any(|(name, _)| name == required) {
            return Err(bad(format!("headers must include {required}")));
        }
    }
    let authority = match raw.authority.as_deref().map(str::trim) {
        Some(authority) if !authority.is_empty() => authority.to_owned(),
        _ => {
            return Err(bad(kya_core::erc8128::AUTHORITY_REQUIRED.into()));
        }
    };
    let body = raw
        .body
        .map(|encoded| {
            LENIENT_BASE64
                .decode(encoded.trim())
                .map_err(|error| bad(format!("body must be the request's body in base64: {error}")))
        })
        .transpose()?;
    Ok(VerifyBody { method: raw.method, url: raw.url, headers, body, label: raw.label, authority })
}

fn bad(message: String) -> Error {
    Error::BadBody(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_shape() {
        let parsed = parse(
            r#"{"method":"POST","url":"https://api.example.com/v1/x?a=1",
               "headers":{"Signature-Input":"eth=(\"@method\")","Signature":"eth=:AA==:","X-Many":["a"," b"]},
               "body":"aGVsbG8=","authority":"api.example.com"}"#,
        )
        .unwrap();
        assert_eq!(parsed.method, "POST");
        assert_eq!(parsed.body.as_deref(), Some(&b"hello"[..]));
        assert!(parsed.headers.contains(&("signature-input".into(), "eth=(\"@method\")".into())));
        assert!(parsed.headers.contains(&("x-many".into(), "a, b".into())));
        assert_eq!(parsed.authority, "api.example.com");
        assert_eq!(parsed.label, None);
        // Unpadded, and with bits past the last byte set.
        let loose = r#"{"method":"GET","url":"https://a/","headers":{"signature-input":"x","signature":"x"},"body":"AB","authority":"a"}"#;
        assert_eq!(parse(loose).unwrap().body, Some(vec![0]));
    }

    #[test]
    fn refuses_what_is_not_the_shape_with_a_message() {
        let cases = [
            ("[]", "JSON object"),
            (r#"{"url":"https://a/","headers":{}}"#, "missing field `method`"),
            (r#"{"method":"GET","url":"https://a/","headers":{"signature":"x"}}"#, "signature-input"),
            (
                r#"{"method":"GET","url":"https://a/","headers":{"signature-input":1,"signature":"x"}}"#,
                "headers.signature-input",
            ),
            (
                r#"{"method":"GET","url":"https://a/","headers":{"signature-input":"x","signature":"x"},"body":"%%","authority":"a"}"#,
                "base64",
            ),
            (r#"{"method":"GET","url":"https://a/","headers":{},"extra":1}"#, "unknown field `extra`"),
            (r#"{"method":" ","url":"https://a/","headers":{}}"#, "method"),
            // The authority the provider serves is required, and not blank.
            (
                r#"{"method":"GET","url":"https://a/","headers":{"signature-input":"x","signature":"x"}}"#,
                "authority is required",
            ),
            (
                r#"{"method":"GET","url":"https://a/","headers":{"signature-input":"x","signature":"x"},"authority":" "}"#,
                "authority is required",
            ),
            (
                r#"{"method":"GET","url":"https://a/","headers":{"signature-input":"x","signature":"x"},"authority":null}"#,
                "authority is required",
            ),
        ];
        for (body, expected) in cases {
            let error = parse(body).unwrap_err();
            assert_eq!(error.status(), 400, "{body}");
            assert!(error.to_string().contains(expected), "{body}: {error}");
        }
    }
}
