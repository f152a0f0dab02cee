//! The Rust sample of `docs/dropping-sessions.md` is the body of `examples/dropping_sessions.rs`,
//! which `cargo test` builds: the page cannot show code that does not compile.

use std::path::Path;

/// The lines of `text` between the line holding `begin` and the one holding `end`.
fn between<'a>(text: &'a str, begin: &str, end: &str) -> Vec<&'a str> {
    let mut lines = text.lines().skip_while(|line| !line.contains(begin));
    assert!(lines.next().is_some(), "no {begin:?}");
    let taken: Vec<&str> = lines.take_while(|line| !line.contains(end)).collect();
    assert!(!taken.is_empty(), "nothing between {begin:?} and {end:?}");
    taken
}

#[test]
fn the_pages_rust_sample_is_the_compiled_example() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let page = std::fs::read_to_string(root.join("../docs/dropping-sessions.md")).unwrap();
    let example = std::fs::read_to_string(root.join("examples/dropping_sessions.rs")).unwrap();
    let sample = between(&page, "```rust", "```");
    let compiled: Vec<String> =
        between(&example, "docs/dropping-sessions.md: begin", "docs/dropping-sessions.md: end")
            .into_iter()
            .map(|line| line.strip_prefix("    ").unwrap_or(line).to_owned())
            .collect();
    assert_eq!(sample, compiled, "docs/dropping-sessions.md's Rust block differs from the example's body");
}
