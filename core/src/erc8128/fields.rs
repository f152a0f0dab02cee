//! `Signature-Input` and `Signature` as RFC 8941 dictionaries (parsed and written by `sfv`):
//! picking one signature by label, reading its ERC-8128 parameters, and the serialised inner
//! list that becomes its `@signature-params` line.

use sfv::{BareItem, Dictionary, InnerList, Integer, Item, Key, ListEntry, Parameters, Parser};

use super::refusal::{Refusal, malformed, unsupported};

/// The label ERC-8128 recommends, and the one [`super::sign_request`] writes.
pub const DEFAULT_LABEL: &str = "eth";

/// The longest nonce accepted, in bytes. The ERC sets none; a nonce store keys on it (a Durable
/// Object's key holds 2 KiB), and 256 bytes is ample for the 128 random bits the ERC suggests.
pub const MAX_NONCE_LEN: usize = 256;

/// One signature, chosen by label, with what ERC-8128 reads from its parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Selected {
    pub label: String,
    /// The covered component names, in their order.
    pub components: Vec<String>,
    /// The inner list with its parameters, serialised: the `@signature-params` value.
    pub params_line: String,
    pub created: u64,
    pub expires: u64,
    pub keyid: String,
    pub nonce: Option<String>,
    /// RFC 9421's `tag`: which profile the signature is for (`erc8128` with a CAIP-10 keyid).
    pub tag: Option<String>,
    /// The signature's bytes (`Signature`'s byte sequence for the label).
    pub signature: Vec<u8>,
}

/// Parses both headers and picks one signature: `label` if given, else `eth`, else the only
/// one. A missing, mistyped or unknown parameter is refused here; other parameters (any
/// extension) are kept in `@signature-params`, which the signature covers, and otherwise ignored.
/// `tag` is read too: a CAIP-10 keyid needs it (`keyid::check_tag`).
pub(crate) fn select(
    signature_input: &str,
    signature: &str,
    label: Option<&str>,
) -> Result<Selected, Refusal> {
    let inputs = parse_dictionary(signature_input, "Signature-Input")?;
    let signatures = parse_dictionary(signature, "Signature")?;
    let label = choose_label(&inputs, label)?;

    let Some(ListEntry::InnerList(list)) = inputs.get(label) else {
        return Err(malformed(format!("Signature-Input {label:?} is not an inner list")));
    };
    let components = component_names(list)?;
    let params = Params::read(&list.params)?;
    let signature = match signatures.get(label) {
        Some(ListEntry::Item(Item { bare_item: BareItem::ByteSequence(bytes), .. })) => bytes.clone(),
        Some(_) => return Err(malformed(format!("Signature {label:?} is not a byte sequence"))),
        None => return Err(malformed(format!("Signature has no member {label:?}"))),
    };
    if signature.is_empty() {
        return Err(malformed(format!("Signature {label:?} is empty")));
    }
    Ok(Selected {
        label: label.to_owned(),
        components,
        params_line: serialize_inner_list(list),
        created: params.created,
        expires: params.expires,
        keyid: params.keyid,
        nonce: params.nonce,
        tag: params.tag,
        signature,
    })
}

/// The `@signature-params` value of a signature ERC-8128 writes: the covered components, then
/// `created`, `expires`, `nonce` (when given) and `keyid`, the ERC's own order.
pub(crate) fn signature_params(
    components: &[String],
    created: u64,
    expires: u64,
    nonce: Option<&str>,
    keyid: &str,
) -> Result<String, String> {
    let string = |value: &str, what: &str| {
        sfv::String::from_string(value.to_owned())
            .map(BareItem::String)
            .map_err(|_| format!("{what} {value:?} is not an RFC 8941 string (printable ASCII)"))
    };
    let integer = |value: u64, what: &str| {
        i64::try_from(value)
            .ok()
            .and_then(|value| Integer::try_from(value).ok())
            .map(BareItem::Integer)
            .ok_or_else(|| format!("{what} {value} is too large for an RFC 8941 integer"))
    };
    let items = components
        .iter()
        .map(|name| string(name, "component").map(Item::new))
        .collect::<Result<Vec<_>, _>>()?;
    let mut params = Parameters::new();
    params.insert(key("created"), integer(created, "created")?);
    params.insert(key("expires"), integer(expires, "expires")?);
    if let Some(nonce) = nonce {
        params.insert(key("nonce"), string(nonce, "nonce")?);
    }
    params.insert(key("keyid"), string(keyid, "keyid")?);
    Ok(serialize_inner_list(&InnerList::with_params(items, params)))
}

/// A `Signature` header's value: `label=:base64:`.
pub(crate) fn signature_header(label: &str, signature: &[u8]) -> String {
    let mut dictionary = Dictionary::new();
    dictionary.insert(key(label), ListEntry::Item(Item::new(signature)));
    let mut ser = sfv::DictSerializer::new();
    ser.members(&dictionary);
    ser.finish().unwrap_or_default()
}

fn key(name: &str) -> Key {
    Key::from_string(name.to_owned()).expect("a fixed or checked RFC 8941 key")
}

fn parse_dictionary(value: &str, header: &str) -> Result<Dictionary, Refusal> {
    // RFC 9421 defines both fields on RFC 8941, so they are parsed by it (no Dates, no
    // Display Strings, which RFC 9651 added later).
    let dictionary: Dictionary = Parser::new(value)
        .with_version(sfv::Version::Rfc8941)
        .parse()
        .map_err(|e| malformed(format!("{header} is not an RFC 8941 dictionary: {e}")))?;
    if dictionary.is_empty() {
        return Err(malformed(format!("{header} is empty")));
    }
    Ok(dictionary)
}

fn choose_label<'a>(inputs: &'a Dictionary, wanted: Option<&'a str>) -> Result<&'a str, Refusal> {
    if let Some(label) = wanted {
        return match inputs.contains_key(label) {
            true => Ok(label),
            false => Err(malformed(format!("no signature labelled {label:?}"))),
        };
    }
    if inputs.contains_key(DEFAULT_LABEL) {
        return Ok(DEFAULT_LABEL);
    }
    match inputs.keys().collect::<Vec<_>>().as_slice() {
        [only] => Ok(only.as_str()),
        several => Err(malformed(format!(
            "{} signatures and none labelled {DEFAULT_LABEL:?}: name the label to verify",
            several.len()
        ))),
    }
}

fn component_names(list: &InnerList) -> Result<Vec<String>, Refusal> {
    let mut names: Vec<String> = Vec::with_capacity(list.items.len());
    for item in &list.items {
        let Some(name) = item.bare_item.as_string() else {
            return Err(malformed("a covered component is not a string"));
        };
        let name = name.as_str();
        if !item.params.is_empty() {
            // `;sf`, `;key`, `;bs`, `;req`, `;tr`, `;name`: RFC 9421 variants ERC-8128 does
            // not need, and whose values this verifier does not rebuild.
            return Err(unsupported(format!("component {name:?} has parameters")));
        }
        if names.iter().any(|seen| seen == name) {
            return Err(malformed(format!("component {name:?} is covered twice")));
        }
        names.push(name.to_owned());
    }
    Ok(names)
}

/// The ERC-8128 parameters of one signature.
struct Params {
    created: u64,
    expires: u64,
    keyid: String,
    nonce: Option<String>,
    tag: Option<String>,
}

impl Params {
    fn read(params: &Parameters) -> Result<Self, Refusal> {
        if params.contains_key("alg") {
            // ERC-8128, "Algorithm and profile signaling": no IANA value names its algorithm,
            // so verifiers should reject a signature that carries `alg`.
            return Err(unsupported("the alg parameter is not accepted: keyid implies ERC-8128"));
        }
        let timestamp = |name: &str| match params.get(name) {
            Some(BareItem::Integer(value)) => {
                u64::try_from(i64::from(*value)).map_err(|_| malformed(format!("{name} is negative")))
            }
            Some(_) => Err(malformed(format!("{name} is not an integer Unix timestamp"))),
            None => Err(malformed(format!("the {name} parameter is missing"))),
        };
        let created = timestamp("created")?;
        let expires = timestamp("expires")?;
        if expires <= created {
            return Err(malformed(format!("expires ({expires}) is not after created ({created})")));
        }
        let keyid = match params.get("keyid") {
            Some(BareItem::String(keyid)) => keyid.as_str().to_owned(),
            Some(_) => return Err(malformed("keyid is not a string")),
            None => return Err(malformed("the keyid parameter is missing")),
        };
        let nonce = match params.get("nonce") {
            Some(BareItem::String(nonce)) if nonce.as_str().is_empty() => {
                return Err(malformed("nonce is empty"));
            }
            Some(BareItem::String(nonce)) if nonce.as_str().len() > MAX_NONCE_LEN => {
                return Err(malformed(format!("nonce is longer than {MAX_NONCE_LEN} bytes")));
            }
            Some(BareItem::String(nonce)) => Some(nonce.as_str().to_owned()),
            Some(_) => return Err(malformed("nonce is not a string")),
            None => None,
        };
        let tag = match params.get("tag") {
            Some(BareItem::String(tag)) => Some(tag.as_str().to_owned()),
            Some(_) => return Err(malformed("tag is not a string")),
            None => None,
        };
        Ok(Self { created, expires, keyid, nonce, tag })
    }
}

/// An inner list with its parameters, serialised by RFC 8941 (parameters in their order).
fn serialize_inner_list(list: &InnerList) -> String {
    let mut ser = sfv::ListSerializer::new();
    {
        let mut inner = ser.inner_list();
        inner.items(&list.items);
        inner.finish().parameters(&list.params);
    }
    ser.finish().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::erc8128::Reason;

    fn pick(input: &str, label: Option<&str>) -> Result<Selected, Refusal> {
        select(input, "eth=:AQID:, sig1=:AQID:, sig2=:AQID:", label)
    }

    #[test]
    fn params_line_is_the_canonical_inner_list_in_received_order() {
        let selected =
            pick("eth=(  \"@method\"   \"@path\" );keyid=\"k\";tag=\"x\";created=1;expires=2", None).unwrap();
        assert_eq!(selected.components, ["@method", "@path"]);
        assert_eq!(selected.params_line, "(\"@method\" \"@path\");keyid=\"k\";tag=\"x\";created=1;expires=2");
        assert_eq!((selected.created, selected.expires, selected.nonce), (1, 2, None));
        assert_eq!(selected.signature, [1, 2, 3]);
    }

    #[test]
    fn writes_what_it_reads() {
        let components = ["@method".to_owned(), "content-digest".to_owned()];
        let line = signature_params(&components, 5, 9, Some("a\"b\\c"), "erc8128:1:0xab").unwrap();
        assert_eq!(
            line,
            "(\"@method\" \"content-digest\");created=5;expires=9;nonce=\"a\\\"b\\\\c\";keyid=\"erc8128:1:0xab\""
        );
        let selected = pick(&format!("eth={line}"), None).unwrap();
        assert_eq!(selected.params_line, line);
        assert_eq!(selected.nonce.as_deref(), Some("a\"b\\c"));
        assert_eq!(signature_header("eth", &[1, 2, 3]), "eth=:AQID:");
        assert!(signature_params(&components, 5, 9, Some("tab\there"), "k").is_err());
    }

    #[test]
    fn refuses_bad_parameters() {
        let cases = [
            ("eth=(\"@method\");created=\"1\";expires=2;keyid=\"k\"", Reason::Malformed),
            ("eth=(\"@method\");created=-1;expires=2;keyid=\"k\"", Reason::Malformed),
            ("eth=(\"@method\");created=1.5;expires=2;keyid=\"k\"", Reason::Malformed),
            ("eth=(\"@method\");created=1;expires=2;keyid=k", Reason::Malformed),
            ("eth=(\"@method\");created=1;expires=2", Reason::Malformed),
            ("eth=(\"@method\");created=1;expires=2;keyid=\"k\";nonce=\"\"", Reason::Malformed),
            ("eth=(\"@method\");created=1;expires=2;keyid=\"k\";alg=\"x\"", Reason::Unsupported),
            ("eth=(@method);created=1;expires=2;keyid=\"k\"", Reason::Malformed),
            ("eth=\"@method\";created=1;expires=2;keyid=\"k\"", Reason::Malformed),
            ("eth=(\"@method\" 1);created=1;expires=2;keyid=\"k\"", Reason::Malformed),
            ("eth=(\"x\";key=\"a\");created=1;expires=2;keyid=\"k\"", Reason::Unsupported),
            // RFC 9651's Dates are not RFC 8941, which these fields are defined on.
            ("eth=(\"@method\");created=@1;expires=2;keyid=\"k\"", Reason::Malformed),
            ("", Reason::Malformed),
        ];
        for (input, reason) in cases {
            assert_eq!(pick(input, None).map(|_| ()).unwrap_err().reason, reason, "{input}");
        }
    }

    #[test]
    fn chooses_labels() {
        let member = "(\"@method\");created=1;expires=2;keyid=\"k\"";
        let two = format!("sig1={member}, sig2={member}");
        assert_eq!(pick(&two, None).unwrap_err().reason, Reason::Malformed);
        assert_eq!(pick(&two, Some("sig2")).unwrap().label, "sig2");
        assert_eq!(pick(&format!("sig1={member}"), None).unwrap().label, "sig1");
        assert_eq!(pick(&format!("{two}, eth={member}"), None).unwrap().label, "eth");
        let unsigned = select(&format!("eth={member}"), "sig1=:AQID:", None);
        assert_eq!(unsigned.unwrap_err().reason, Reason::Malformed);
        let empty = select(&format!("eth={member}"), "eth=::", None);
        assert_eq!(empty.unwrap_err().reason, Reason::Malformed);
    }
}
