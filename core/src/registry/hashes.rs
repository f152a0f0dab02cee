//! The two hashes a registration commits to, from what a person writes: its constitution's
//! text and its list of capabilities. The same rules as `kya-client`'s (`kya register
//! --constitution-text`, `--capabilities`), for the hosts without it (the Python package).

use alloy_primitives::{B256, keccak256};

/// Why a list of capabilities has no hash.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CapabilitiesError {
    /// No name left once blanks are dropped.
    #[error("capabilities: give at least one name")]
    Empty,
    /// A name with the separator in it: two lists could then hash alike.
    #[error("capability {0:?}: names cannot contain ','")]
    Comma(String),
}

/// The constitution hash of a constitution's text: `keccak256` of its UTF-8 bytes, exactly as
/// given (no trimming: the hash commits to the document).
pub fn constitution_hash(text: &str) -> B256 {
    keccak256(text.as_bytes())
}

/// The capability hash of a list of capability names: each name trimmed, empty names dropped,
/// sorted and deduplicated (the set matters, not the order it was typed in), joined with `,`,
/// then `keccak256` of the UTF-8 bytes. So `search, summarise` and `summarise,search` agree.
pub fn capability_hash<S: AsRef<str>>(capabilities: &[S]) -> Result<B256, CapabilitiesError> {
    let mut names: Vec<&str> =
        capabilities.iter().map(|name| name.as_ref().trim()).filter(|name| !name.is_empty()).collect();
    if names.is_empty() {
        return Err(CapabilitiesError::Empty);
    }
    if let Some(name) = names.iter().find(|name| name.contains(',')) {
        return Err(CapabilitiesError::Comma((*name).to_owned()));
    }
    names.sort_unstable();
    names.dedup();
    Ok(keccak256(names.join(",").as_bytes()))
}

#[cfg(test)]
mod tests {
    use alloy_primitives::b256;

    use super::*;

    #[test]
    fn the_constitution_hash_is_keccak_of_the_text_as_given() {
        assert_eq!(
            constitution_hash(""),
            b256!("0xc5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470")
        );
        assert_ne!(constitution_hash("Be honest."), constitution_hash("Be honest. "));
    }

    #[test]
    fn the_capability_hash_is_of_the_sorted_set() {
        let expected = keccak256(b"search,summarise");
        assert_eq!(capability_hash(&["search", "summarise"]), Ok(expected));
        assert_eq!(capability_hash(&[" summarise", "search ", "", "search"]), Ok(expected));
        assert_eq!(capability_hash::<&str>(&[]), Err(CapabilitiesError::Empty));
        assert_eq!(capability_hash(&[" ", ""]), Err(CapabilitiesError::Empty));
        assert_eq!(
            capability_hash(&["a,b"]).unwrap_err().to_string(),
            "capability \"a,b\": names cannot contain ','"
        );
    }
}
