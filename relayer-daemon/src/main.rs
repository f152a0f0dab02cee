//! `kya-relayer`: the gasless relayer daemon.
//!
//! Foundation only: it serves `GET /health` on `RELAYER_PORT` (default 3001). The relay
//! endpoints arrive with the relayer issue.

use warp::Filter;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let port: u16 = std::env::var("RELAYER_PORT")
        .ok()
        .map(|port| port.parse())
        .transpose()?
        .unwrap_or(3001);
    let health = warp::path("health")
        .and(warp::get())
        .map(|| warp::reply::json(&serde_json::json!({ "status": "ok" })));
    tracing::info!(port, "relayer listening");
    warp::serve(health).run(([127, 0, 0, 1], port)).await;
    Ok(())
}
