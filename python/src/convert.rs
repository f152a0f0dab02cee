//! What crosses between Python and kya-core, read and written once here: header fields (a
//! mapping or `(name, value)` pairs, as httpx, requests and ASGI hold them), bodies (`bytes` or
//! `str`), addresses, the clock, and JSON values (the claims of a pass) as Python objects.

use std::time::{SystemTime, UNIX_EPOCH};

use alloy_primitives::Address;
use pyo3::{
    prelude::*,
    types::{PyBool, PyDict, PyList, PyString},
};
use serde_json::Value;

use crate::error::invalid;

/// Header fields from a mapping (`dict`, `httpx.Headers`, `requests`' headers) or an iterable of
/// `(name, value)` pairs; names in any case, values `str` or `bytes` (as ASGI gives them). A
/// field given as a list of values is those values trimmed and joined by `", "` (RFC 9421 2.1).
pub(crate) fn headers_of(headers: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<(String, String)>> {
    let Some(headers) = headers.filter(|headers| !headers.is_none()) else { return Ok(Vec::new()) };
    let pairs = match headers.hasattr("items")? {
        true => headers.call_method0("items")?,
        false => headers.clone(),
    };
    let mut fields = Vec::new();
    for pair in pairs.try_iter()? {
        let (name, value): (Bound<'_, PyAny>, Bound<'_, PyAny>) =
            pair?.extract().map_err(|_| invalid("headers must be a mapping or (name, value) pairs"))?;
        let value = match value.cast::<PyList>() {
            Ok(values) => {
                let values: PyResult<Vec<String>> =
                    values.iter().map(|value| text(&value, "a header value")).collect();
                values?.iter().map(|value| value.trim()).collect::<Vec<_>>().join(", ")
            }
            Err(_) => text(&value, "a header value")?,
        };
        fields.push((text(&name, "a header name")?, value));
    }
    Ok(fields)
}

/// `str`, or `bytes` read as Latin-1 (HTTP's own reading of a field's octets).
fn text(value: &Bound<'_, PyAny>, what: &str) -> PyResult<String> {
    if let Ok(text) = value.cast::<PyString>() {
        return Ok(text.to_cow()?.into_owned());
    }
    match value.extract::<Vec<u8>>() {
        Ok(bytes) => Ok(bytes.iter().map(|&byte| char::from(byte)).collect()),
        Err(_) => Err(invalid(format!("{what} must be str or bytes, not {}", value.get_type().name()?))),
    }
}

/// The fields as kya-core takes them.
pub(crate) fn pairs(fields: &[(String, String)]) -> Vec<(&str, &str)> {
    fields.iter().map(|(name, value)| (name.as_str(), value.as_str())).collect()
}

/// A body: `None`, `str` (sent as its UTF-8 bytes) or bytes-like.
pub(crate) fn body_of(body: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Vec<u8>>> {
    let Some(body) = body.filter(|body| !body.is_none()) else { return Ok(None) };
    if let Ok(text) = body.cast::<PyString>() {
        return Ok(Some(text.to_cow()?.as_bytes().to_vec()));
    }
    body.extract::<Vec<u8>>().map(Some).map_err(|_| {
        invalid(format!(
            "body must be bytes or str, not {}",
            body.get_type().name().map_or_else(|_| "?".into(), |name| name.to_string())
        ))
    })
}

/// An address (`0x` and 40 hex digits, any case), refused with `what` named.
pub(crate) fn parse_address(text: &str, what: &str) -> PyResult<Address> {
    kya_core::api::query::parse_wallet(text.trim()).map_err(|reason| invalid(format!("{what}: {reason}")))
}

/// Now in Unix seconds, unless the caller says when.
pub(crate) fn now_or(now: Option<u64>) -> u64 {
    now.unwrap_or_else(|| now_ms() / 1_000)
}

/// The clock, in Unix milliseconds.
pub(crate) fn now_ms() -> u64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
}

/// A JSON value as Python holds one: `dict`, `list`, `str`, `int`, `float`, `bool`, `None`.
pub(crate) fn to_py<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(flag) => PyBool::new(py, *flag).to_owned().into_any(),
        Value::Number(number) => match (number.as_u64(), number.as_i64()) {
            (Some(whole), _) => whole.into_pyobject(py)?.into_any(),
            (None, Some(whole)) => whole.into_pyobject(py)?.into_any(),
            _ => number.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any(),
        },
        Value::String(text) => PyString::new(py, text).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(to_py(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(members) => {
            let dict = PyDict::new(py);
            for (name, member) in members {
                dict.set_item(name, to_py(py, member)?)?;
            }
            dict.into_any()
        }
    })
}

/// A JSON document given as a `dict` (or any JSON-able object), `str` or `bytes`, as text.
pub(crate) fn json_text(document: &Bound<'_, PyAny>, what: &str) -> PyResult<String> {
    if let Ok(text) = document.cast::<PyString>() {
        return Ok(text.to_cow()?.into_owned());
    }
    if let Ok(bytes) = document.extract::<Vec<u8>>() {
        return String::from_utf8(bytes).map_err(|_| invalid(format!("{what} is not UTF-8")));
    }
    let json = document.py().import("json")?;
    json.call_method1("dumps", (document,))?
        .extract()
        .map_err(|_| invalid(format!("{what} must be a JSON document (a dict, str or bytes)")))
}
