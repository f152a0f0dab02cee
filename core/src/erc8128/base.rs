//! The RFC 9421 signature base (section 2.5): one line per covered component, `"name": value`,
//! then the `"@signature-params"` line, joined by `\n` with none after the last.

use super::refusal::{Refusal, malformed, unsupported};
use super::target::Target;

/// The parts of a request that components are derived from.
pub(crate) struct Message<'a> {
    pub method: &'a str,
    pub target: &'a Target,
    /// Header fields as received: names in any case, a name possibly more than once.
    pub headers: &'a [(&'a str, &'a str)],
}

/// The signature base for `components`, closed by `params_line` (the serialised inner list).
pub(crate) fn signature_base(
    message: &Message<'_>,
    components: &[String],
    params_line: &str,
) -> Result<String, Refusal> {
    let mut base = String::new();
    for name in components {
        let value = component_value(message, name)?;
        // The base is ASCII lines: a value that could add a line, or that is not ASCII, would
        // let two different requests share one base (RFC 9421 2.5 requires failing).
        if !value.bytes().all(|b| b == b'\t' || (b' '..=b'~').contains(&b)) {
            return Err(malformed(format!("component {name:?} has a value outside visible ASCII")));
        }
        base.push_str(&format!("\"{name}\": {value}\n"));
    }
    base.push_str(&format!("\"@signature-params\": {params_line}"));
    Ok(base)
}

/// A component's value: derived (`@...`) from the method and URL, else the header field.
fn component_value(message: &Message<'_>, name: &str) -> Result<String, Refusal> {
    let target = message.target;
    match name {
        // The method as given: RFC 9421 2.2.1 transforms no case (methods are case-sensitive).
        "@method" => match is_token(message.method) {
            true => Ok(message.method.to_owned()),
            false => Err(malformed(format!("method {:?} is not an HTTP token", message.method))),
        },
        "@authority" => Ok(target.authority.clone()),
        "@path" => Ok(target.path.clone()),
        "@query" => Ok(target.query_value()),
        "@scheme" => Ok(target.scheme.clone()),
        "@target-uri" => Ok(target.target_uri()),
        "@request-target" => Ok(target.request_target()),
        // `@query-param` needs a `name` parameter (refused with all component parameters);
        // `@status` belongs to responses.
        derived if derived.starts_with('@') => {
            Err(unsupported(format!("derived component {derived:?} is not supported")))
        }
        field => {
            check_field_name(field)?;
            field_value(message.headers, field)
                .ok_or_else(|| malformed(format!("covers the field {field:?}, which is absent")))
        }
    }
}

/// An HTTP field's value as RFC 9421 2.1 canonicalises it: every instance's value with its
/// surrounding whitespace trimmed and obsolete line folding turned into a space, joined by
/// `", "` in the order received. Whitespace inside a value stays as it is. `None`: absent.
pub(crate) fn field_value(headers: &[(&str, &str)], name: &str) -> Option<String> {
    let values: Vec<String> = headers
        .iter()
        .filter(|(field, _)| field.eq_ignore_ascii_case(name))
        .map(|(_, value)| unfold(value).trim_matches([' ', '\t']).to_owned())
        .collect();
    (!values.is_empty()).then(|| values.join(", "))
}

/// Obsolete line folding (CRLF or LF, then spaces or tabs) as one space (RFC 9112 5.2).
fn unfold(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(at) = rest.find(['\r', '\n']) {
        out.push_str(&rest[..at]);
        let after = rest[at..].trim_start_matches(['\r', '\n']);
        let folded = after.trim_start_matches([' ', '\t']);
        if folded.len() == after.len() {
            // A line break with no whitespace after it is no fold: kept, and refused later.
            out.push_str(&rest[at..rest.len() - after.len()]);
        } else {
            out.push(' ');
        }
        rest = folded;
    }
    out.push_str(rest);
    out
}

/// RFC 9421 2.1: a field's component name is its lowercased field name (an RFC 9110 token).
pub(crate) fn check_field_name(name: &str) -> Result<(), Refusal> {
    if !is_token(name) {
        return Err(malformed(format!("component {name:?} is not a field name")));
    }
    if name.bytes().any(|b| b.is_ascii_uppercase()) {
        return Err(malformed(format!("component {name:?} is not lowercase")));
    }
    Ok(())
}

/// RFC 9110 5.6.2 `token`: one or more `tchar`.
fn is_token(value: &str) -> bool {
    !value.is_empty() && value.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base(method: &str, url: &str, headers: &[(&str, &str)], names: &[&str]) -> String {
        let target = Target::parse(url).unwrap();
        let message = Message { method, target: &target, headers };
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        signature_base(&message, &names, "(...)").unwrap()
    }

    fn refused(method: &str, url: &str, headers: &[(&str, &str)], name: &str) -> Refusal {
        let target = Target::parse(url).unwrap();
        let message = Message { method, target: &target, headers };
        signature_base(&message, &[name.to_owned()], "()").unwrap_err()
    }

    #[test]
    fn derived_components() {
        let got = base(
            "POST",
            "https://www.Example.com:443/path?param=value",
            &[],
            &["@method", "@authority", "@path", "@query", "@scheme", "@target-uri", "@request-target"],
        );
        assert_eq!(
            got,
            "\"@method\": POST\n\"@authority\": www.example.com\n\"@path\": /path\n\
             \"@query\": ?param=value\n\"@scheme\": https\n\
             \"@target-uri\": https://www.example.com/path?param=value\n\
             \"@request-target\": /path?param=value\n\"@signature-params\": (...)"
        );
    }

    #[test]
    fn fields_follow_rfc_9421_2_1() {
        let headers = [
            ("Cache-Control", " max-age=60 "),
            ("X-Empty", ""),
            ("cache-control", "must-revalidate"),
            ("X-Folded", "a\r\n  b"),
            ("X-Spaced", "a  b"),
        ];
        let got = base("GET", "https://e.example/", &headers, &["cache-control", "x-empty"]);
        assert!(got.starts_with("\"cache-control\": max-age=60, must-revalidate\n\"x-empty\": \n"));
        assert!(base("GET", "https://e.example/", &headers, &["x-folded"]).contains(": a b\n"));
        // No collapsing of inner whitespace: RFC 9421 keeps it.
        assert!(base("GET", "https://e.example/", &headers, &["x-spaced"]).contains(": a  b\n"));
    }

    #[test]
    fn refuses_what_cannot_be_rebuilt() {
        use crate::erc8128::Reason::{Malformed, Unsupported};
        let url = "https://e.example/";
        assert_eq!(refused("GET", url, &[], "content-digest").reason, Malformed);
        assert_eq!(refused("GET", url, &[], "Content-Digest").reason, Malformed);
        assert_eq!(refused("GET", url, &[], "@status").reason, Unsupported);
        assert_eq!(refused("GET", url, &[], "@query-param").reason, Unsupported);
        assert_eq!(refused("GET", url, &[("x-a", "a\nb")], "x-a").reason, Malformed);
        assert_eq!(refused("GET", url, &[("x-a", "é")], "x-a").reason, Malformed);
        assert_eq!(refused("G T", url, &[], "@method").reason, Malformed);
    }

    #[test]
    fn method_case_is_kept() {
        assert!(base("patch", "https://e.example/", &[], &["@method"]).starts_with("\"@method\": patch\n"));
    }
}
