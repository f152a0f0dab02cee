//! The local deployment's KYA pass signing key: a private JWK set kept in a dotenv file that
//! `wrangler dev --env-file` reads as the secret `PASS_SIGNING_KEYS` (shown hidden in its
//! banner, never in a `--var`). Made once from the OS's entropy and kept, so the JWKS a local
//! provider cached stays valid across restarts of the system.

use std::{fs, io::Write, os::unix::fs::OpenOptionsExt, path::Path};

use anyhow::Context;
use kya_core::pass::{SigningKey, SigningKeys};

/// The variable the file sets.
const NAME: &str = "PASS_SIGNING_KEYS";

/// The keys in `path`, made and written (owner-only) when the file does not exist yet.
pub fn ensure(path: &Path) -> anyhow::Result<SigningKeys> {
    if path.exists() {
        let text = fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        return read(&text).with_context(|| format!("{} holds no pass keys", path.display()));
    }
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|error| anyhow::anyhow!("the OS gave no entropy: {error}"))?;
    let keys = SigningKeys::new(SigningKey::from_seed(&seed), Vec::new());
    if let Some(folder) = path.parent() {
        fs::create_dir_all(folder)?;
    }
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    file.write_all(render(&keys).as_bytes())?;
    Ok(keys)
}

/// The dotenv line: single-quoted, which dotenv readers take literally (JSON holds no `'`).
fn render(keys: &SigningKeys) -> String {
    format!(
        "# The local KYA pass signing key (kya-devchain pass-keys). Not for any deployment.\n{NAME}='{}'\n",
        keys.private_json()
    )
}

fn read(text: &str) -> anyhow::Result<SigningKeys> {
    let line = text
        .lines()
        .find_map(|line| line.strip_prefix(NAME)?.strip_prefix('='))
        .with_context(|| format!("no {NAME}= line"))?;
    let json = line.trim().trim_matches('\'');
    Ok(SigningKeys::from_json(json)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_made_once_kept_private_and_read_back() {
        let folder = std::env::temp_dir().join(format!("kya-pass-keys-{}", std::process::id()));
        let path = folder.join("pass.env");
        let _ = fs::remove_dir_all(&folder);
        let made = ensure(&path).unwrap();
        let again = ensure(&path).unwrap();
        assert_eq!(made.public(), again.public(), "the second call reads the first key");
        let mode = fs::metadata(&path).unwrap().permissions();
        assert_eq!(std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777, 0o600);
        let other = folder.join("other.env");
        assert_ne!(ensure(&other).unwrap().public(), made.public(), "each file its own random key");
        fs::remove_dir_all(&folder).unwrap();
    }
}
