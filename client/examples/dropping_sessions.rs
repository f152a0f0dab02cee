//! The Rust sample of `docs/dropping-sessions.md`, compiled with the crate's examples so the page
//! cannot drift from the API: the page's block is the body of [`follow`] between the markers,
//! which `tests/docs_samples.rs` compares. It builds; it is not meant to be run (it follows a
//! deployment at `kya.example`).
//!
//! ```sh
//! cargo build -p kya-client --example dropping_sessions
//! ```

use std::error::Error;

use alloy::primitives::Address;
use kya_core::feed::Cursor;

/// The page's loop: drops a wallet's sessions when its agent stops being compliant.
async fn follow() -> Result<(), Box<dyn Error>> {
    // docs/dropping-sessions.md: begin
    use kya_client::{ApiClient, ChangeFollower};
    use kya_core::feed::{ChangesQuery, Detail, EventType, Finality};

    let api = ApiClient::new("https://kya.example")?;
    let mut query = ChangesQuery::parse([("type", "agent.compliance_changed")])?;
    query.after = load_position()?; // your own storage; None: from the oldest event kept
    let mut feed = ChangeFollower::streaming(api, query);
    loop {
        let event = feed.next().await?;
        if event.change.kind == EventType::ComplianceChanged
            && event.finality == Finality::Provisional
            && matches!(event.change.detail, Detail::Compliance { to: false, .. })
        {
            drop_sessions(event.change.wallet).await; // your own
        }
        save_position(feed.position())?;
    }
    // docs/dropping-sessions.md: end
}

/// The provider's own storage of its position (here: none).
fn load_position() -> Result<Option<Cursor>, Box<dyn Error>> {
    Ok(None)
}

/// The provider's own storage of its position (here: nowhere).
fn save_position(_position: Option<Cursor>) -> Result<(), Box<dyn Error>> {
    Ok(())
}

/// The provider's own sessions (here: none).
async fn drop_sessions(_wallet: Address) {}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn Error>> {
    follow().await
}
