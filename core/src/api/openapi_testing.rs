//! Reading the services' OpenAPI documents in tests (feature `test-util`): the edge API's and
//! the relayer's contract tests both follow the documents' `$ref`s, by this one rule.

use serde_json::Value;

/// `value`, or what its `$ref` (a JSON pointer within the document, `#/components/...`) points
/// at in `document`. A reference that does not resolve is a broken document: it panics.
pub fn resolved<'a>(document: &'a Value, value: &'a Value) -> &'a Value {
    match value["$ref"].as_str().and_then(|reference| reference.strip_prefix('#')) {
        Some(pointer) => document
            .pointer(pointer)
            .unwrap_or_else(|| panic!("the document's reference {pointer} resolves to nothing")),
        None => value,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_reference_is_followed_and_a_value_without_one_is_itself() {
        let document = json!({ "components": { "schemas": { "Agent": { "type": "object" } } } });
        let reference = json!({ "$ref": "#/components/schemas/Agent" });
        assert_eq!(resolved(&document, &reference), &json!({ "type": "object" }));
        let inline = json!({ "type": "string" });
        assert_eq!(resolved(&document, &inline), &inline);
    }

    #[test]
    #[should_panic(expected = "/components/schemas/Missing resolves to nothing")]
    fn a_reference_to_nothing_is_a_broken_document() {
        resolved(&json!({}), &json!({ "$ref": "#/components/schemas/Missing" }));
    }
}
