//! `kya-relayer`: configuration from the environment, logs, then [`kya_relayer::server::run`]
//! until SIGINT or SIGTERM.

use anyhow::Context;
use kya_relayer::{Config, Relayer, server};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        // Colour codes only on a terminal: log files and collectors get plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let config = Config::from_env()?;
    tracing::info!(?config, "starting");
    let address = (config.server.host, config.server.port);
    // A stop while start-up still waits for the node ends the process at once.
    let mut shutdown = Box::pin(shutdown_signal());
    let relayer = tokio::select! {
        // The detail, not the clients' fixed message: at startup the operator reads this.
        started = Relayer::start(config) => started.map_err(|error| anyhow::anyhow!(error.detail()))?,
        () = &mut shutdown => return Ok(()),
    };
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .with_context(|| format!("binding {}:{}", address.0, address.1))?;
    let metrics_address = relayer.metrics_address();
    let metrics = tokio::net::TcpListener::bind(metrics_address)
        .await
        .with_context(|| format!("binding the metrics listener {metrics_address}"))?;
    server::run(listener, metrics, relayer, shutdown).await;
    Ok(())
}

/// Completes on SIGINT (Ctrl-C) or SIGTERM.
async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("installing the SIGTERM handler");
    tokio::select! {
        _ = interrupt => tracing::info!("SIGINT: shutting down"),
        _ = terminate.recv() => tracing::info!("SIGTERM: shutting down"),
    }
}
