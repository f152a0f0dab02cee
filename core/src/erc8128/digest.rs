//! RFC 9530 `Content-Digest`: an RFC 8941 dictionary of algorithm names to byte sequences,
//! each the digest of the body's bytes. `sha-256` and `sha-512` are known here.

use sfv::{BareItem, Dictionary, Item, ListEntry, Parser};
use sha2::{Digest, Sha256, Sha512};

use super::refusal::{Reason, Refusal, malformed, unsupported};

/// The `Content-Digest` value a signer sends with `body`: `sha-256=:<base64>:`.
pub fn content_digest(body: &[u8]) -> String {
    let mut dictionary = Dictionary::new();
    let key = sfv::Key::from_string("sha-256".to_owned()).expect("a valid key");
    dictionary.insert(key, ListEntry::Item(Item::new(Sha256::digest(body).to_vec())));
    let mut ser = sfv::DictSerializer::new();
    ser.members(&dictionary);
    ser.finish().unwrap_or_default()
}

/// Checks `body` against a `Content-Digest` value. Every known algorithm in it must match; the
/// unknown ones are ignored (RFC 9530 lets a recipient skip what it does not support), but at
/// least one known algorithm must be there.
pub(crate) fn check(header: &str, body: &[u8]) -> Result<(), Refusal> {
    let dictionary: Dictionary = Parser::new(header)
        .with_version(sfv::Version::Rfc8941)
        .parse()
        .map_err(|e| malformed(format!("content-digest is not an RFC 8941 dictionary: {e}")))?;
    let mut known = 0;
    for (algorithm, entry) in &dictionary {
        let computed: Vec<u8> = match algorithm.as_str() {
            "sha-256" => Sha256::digest(body).to_vec(),
            "sha-512" => Sha512::digest(body).to_vec(),
            _ => continue,
        };
        known += 1;
        let ListEntry::Item(Item { bare_item: BareItem::ByteSequence(sent), .. }) = entry else {
            return Err(malformed(format!("content-digest {algorithm} is not a byte sequence")));
        };
        if *sent != computed {
            return Err(Refusal::new(
                Reason::DigestMismatch,
                format!("the body's {algorithm} digest is not the one content-digest covers"),
            ));
        }
    }
    match known {
        0 => Err(unsupported("content-digest has neither sha-256 nor sha-512")),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc_examples() {
        // RFC 9530's example body (section 2 and appendix B), whose sha-512 is also the
        // Content-Digest of RFC 9421's test request (appendix B.2).
        let body = b"{\"hello\": \"world\"}";
        assert_eq!(content_digest(body), "sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:");
        let sha512 = "sha-512=:WZDPaVn/7XgHaAy8pmojAkGWoRx2UFChF41A2svX+TaPm+AbwAgBWnrIiYllu7BN\
                      NyealdVLvRwEmTHWXvJwew==:";
        check(sha512, body).unwrap();
        check(&format!("{}, {sha512}", content_digest(body)), body).unwrap();
    }

    #[test]
    fn mismatches_and_unknowns() {
        let body = b"abc";
        let other = content_digest(b"abd");
        assert_eq!(check(&other, body).unwrap_err().reason, Reason::DigestMismatch);
        // A matching sha-256 does not excuse a wrong sha-512 beside it.
        let wrong512 = format!("{}, sha-512=:AAAA:", content_digest(body));
        assert_eq!(check(&wrong512, body).unwrap_err().reason, Reason::DigestMismatch);
        // Unknown algorithms are skipped, but one known one is needed.
        check(&format!("md5=:AAAA:, {}", content_digest(body)), body).unwrap();
        assert_eq!(check("md5=:AAAA:", body).unwrap_err().reason, Reason::Unsupported);
        assert_eq!(check("sha-256=abc", body).unwrap_err().reason, Reason::Malformed);
        assert_eq!(check("sha-256=:not base64!:", body).unwrap_err().reason, Reason::Malformed);
        // The ERC's example value is hex inside the colons, not base64: no real digest.
        let erc = "sha-256=:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad:";
        assert_ne!(check(erc, b"abc"), Ok(()));
    }

    #[test]
    fn empty_body_has_a_digest_too() {
        check(&content_digest(b""), b"").unwrap();
    }
}
