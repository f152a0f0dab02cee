//! The relayer's rules, pure: no I/O type is imported here. Time, block data, balances and
//! the store's facts are passed in; each rule returns a value or a decision that the pipeline
//! ([`crate::relayer`]) carries out. Their tests feed values and check what comes out.

pub(crate) mod fees;
pub(crate) mod follow;
pub(crate) mod lanes;
pub(crate) mod nonce;
pub(crate) mod pacing;
pub(crate) mod reconcile;
pub(crate) mod request;
pub(crate) mod status;
pub(crate) mod stuck;

#[cfg(test)]
mod purity {
    use std::{collections::BTreeSet, path::Path};

    /// Crates of I/O a rule must not reach: the HTTP server, the database engines, the runtime.
    const IO_CRATES: [&str; 6] = ["warp", "rusqlite", "postgres", "tokio", "tokio_postgres", "reqwest"];

    /// The production code of a file: up to its tests (`#[cfg(test)]`, at the end of a file by
    /// the house style) and without comments (`//` to the end of a line), so a doc comment that
    /// names another module is not taken for an import.
    fn code_of(path: &Path) -> String {
        let text =
            std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
        let production = text.split("#[cfg(test)]").next().unwrap_or_default();
        production.lines().map(|line| line.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
    }

    /// The crate modules a piece of code names (`crate::error::…` gives `error`).
    fn crate_modules_named(code: &str) -> BTreeSet<String> {
        code.match_indices("crate::")
            .map(|(at, _)| {
                code[at + "crate::".len()..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect()
            })
            .filter(|name: &String| !name.is_empty())
            .collect()
    }

    /// Whether `code` uses `krate` as a path's root (`warp::…`, `use warp`), not as a part of
    /// another name (`kya_native_http`) or of a path (`tokio_postgres` for `postgres`).
    fn uses(code: &str, krate: &str) -> bool {
        code.match_indices(krate).any(|(at, _)| {
            let before = code[..at].chars().next_back();
            let after = &code[at + krate.len()..];
            let starts_a_path = before.is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == ':'));
            starts_a_path && (after.starts_with("::") || after.starts_with(';') || after.starts_with(" as "))
        })
    }

    /// `rules/` and every crate module it reaches, and every one those reach, import no I/O
    /// crate: the rules are tested by values alone, and stay so as the crate grows.
    #[test]
    fn the_rules_reach_no_io_crate_directly_or_through_another_module() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files: Vec<_> = std::fs::read_dir(src.join("rules"))
            .expect("src/rules")
            .map(|entry| entry.expect("a rules file").path())
            .collect();
        let mut seen = BTreeSet::new();
        let mut reached = vec![];
        while let Some(file) = files.pop() {
            let code = code_of(&file);
            for krate in IO_CRATES {
                assert!(!uses(&code, krate), "{} uses {krate}, and the rules reach it", file.display());
            }
            for module in crate_modules_named(&code) {
                if module == "rules" || !seen.insert(module.clone()) {
                    continue;
                }
                let single = src.join(format!("{module}.rs"));
                let file = if single.exists() { single } else { src.join(&module).join("mod.rs") };
                reached.push(module);
                files.push(file);
            }
        }
        // The check sees what it checks: the rules reach the error type, and no more.
        assert_eq!(reached, ["error"]);
    }

    #[test]
    fn a_crate_is_seen_as_a_paths_root_only() {
        assert!(uses("use warp::http::StatusCode;", "warp"));
        assert!(uses("fn f(e: rusqlite::Error)", "rusqlite"));
        assert!(!uses("use tokio_postgres::Client;", "postgres"));
        assert!(!uses("kya_native_http::causes(x)", "http"));
        assert!(!uses("let warped = 1;", "warp"));
    }
}
