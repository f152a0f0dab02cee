//! `kya-devchain up`: starts anvil (chain id 84532), deploys the forwarder and the registry, adds
//! a regulator, seeds demo data (or `--agents N` bulk agents), writes the env file and keeps the
//! chain running until Ctrl-C or SIGTERM.

use std::{path::PathBuf, time::Instant};

use anyhow::Context;
use clap::{Parser, Subcommand};
use kya_devchain::{Anvil, AnvilOptions, Chain, deploy, envfile, seed};

#[derive(Debug, Parser)]
#[command(version, about = "Local chain for the KYA registry")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Start anvil, deploy, seed, and run until interrupted.
    Up {
        /// Port on 127.0.0.1 (0 picks a free one).
        #[arg(long, default_value_t = 8545)]
        port: u16,
        /// Seed this many bulk agents instead of the demo data (for benchmarks).
        #[arg(long)]
        agents: Option<u64>,
        /// Where to write the env file.
        #[arg(long, default_value = envfile::DEFAULT_PATH)]
        env_file: PathBuf,
    },
    /// Make the local KYA pass signing key (a dotenv file for `wrangler dev --env-file`), or keep
    /// the one the file holds; prints its kid.
    PassKeys {
        #[arg(long, default_value = ".devchain/pass.env")]
        file: PathBuf,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let (port, agents, env_file) = match Cli::parse().command {
        Command::Up { port, agents, env_file } => (port, agents, env_file),
        Command::PassKeys { file } => {
            let keys = kya_devchain::pass_keys::ensure(&file)?;
            println!("kya-devchain: pass signing key {} in {}", keys.signer().kid(), file.display());
            return Ok(());
        }
    };
    let anvil = Anvil::start(&AnvilOptions { port, ..AnvilOptions::default() })?;
    let chain = Chain::connect(&anvil.rpc_url())?;
    let deployment = deploy::deploy(&chain).await.context("deploying the contracts")?;

    let started = Instant::now();
    let demo_path = env_file.with_file_name("demo.json");
    let (summary, demo_data) = match agents {
        Some(count) => {
            let total = seed::seed_bulk(&chain, &deployment, count).await.context("seeding bulk agents")?;
            (format!("{total} bulk agents"), None)
        }
        None => {
            let demo = seed::seed_demo(&chain, &deployment).await.context("seeding demo data")?;
            envfile::write_atomically(&demo_path, &serde_json::to_string_pretty(&demo)?)?;
            (
                format!("{} demo agents, {} revenue reports", demo.agents.len(), demo.revenue.len()),
                Some(demo_path.as_path()),
            )
        }
    };
    let seconds = started.elapsed().as_secs_f64();

    let env = envfile::render(&anvil.rpc_url(), anvil.chain_id(), &deployment, demo_data);
    envfile::write_atomically(&env_file, &env)?;

    println!(
        "kya-devchain: anvil (pid {}) at {}, chain id {}",
        anvil.pid(),
        anvil.rpc_url(),
        anvil.chain_id()
    );
    println!("  registry   {}", deployment.registry);
    println!("  forwarder  {}", deployment.forwarder);
    println!("  regulator  {}", deployment.regulator);
    println!("  seeded     {summary} in {seconds:.1} s");
    println!("  env file   {}", env_file.display());
    println!("Ctrl-C stops the chain.");

    shutdown_signal().await;
    drop(anvil);
    let _ = std::fs::remove_file(&env_file);
    println!("kya-devchain: chain stopped");
    Ok(())
}

async fn shutdown_signal() {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("installing a SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
}
