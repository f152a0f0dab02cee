//! The `kya` command line: parse, run one command, print (text or `--json`), exit with a code
//! scripts can use (`kya check` and `kya verify`: 0 provision, 3 renew attestation, 4 deny or
//! register, and for `verify` a refused signature; any error: 1, its message on stderr).

mod args;
mod missing_consents;
mod pass;
mod register;
mod render;
mod settings;
mod signed;
mod watch;

use std::{io::IsTerminal, time::Duration};

use alloy::primitives::{B256, U256};
use anyhow::{Result, anyhow};
use clap::Parser;
use kya_core::{AgentStatus, KyaDecision};
use serde::Serialize;

use self::{
    args::{Cli, Command, RelayerCommand, Signing},
    render::Style,
    settings::{Settings, address, agent_id},
};
use crate::{Outcome, Progress, RevenueReport, Write, WriteOptions, cents, direct_write, relay_write};

/// Exit code of any error.
const EXIT_ERROR: i32 = 1;
/// Exit code of a registration that lacks a party's consent: its typed data printed, nothing sent.
const EXIT_CONSENT_NEEDED: i32 = 5;

/// Runs the command line on the process's arguments; returns the exit code.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            let _ = error.print();
            return if error.use_stderr() { EXIT_ERROR } else { 0 };
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return EXIT_ERROR;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            EXIT_ERROR
        }
    }
}

async fn run(cli: Cli) -> Result<i32> {
    let settings = Settings::resolve(&cli.global)?;
    let style = Style::detect();
    let json = settings.json;
    // Prints `value` as JSON, or `text` of it.
    let show = |value: &dyn erased::Json, text: String| -> Result<()> {
        if json {
            println!("{}", value.to_json()?);
        } else {
            println!("{text}");
        }
        Ok(())
    };
    match cli.command {
        Command::Check { wallet } => {
            let wallet = match wallet {
                Some(wallet) => address(&wallet, "wallet")?,
                None => own_address().map_err(|error| anyhow!("give a wallet, or {error:#}"))?,
            };
            let check = settings.api()?.kya(wallet).await?;
            let decision = check.decision();
            if json {
                let mut value = serde_json::to_value(&check)?;
                value["decision"] = serde_json::to_value(decision)?;
                println!("{}", serde_json::to_string_pretty(&value)?);
            } else {
                println!("{}", render::check(style, &check));
            }
            return Ok(match decision {
                KyaDecision::Provision => 0,
                KyaDecision::RenewAttestation => 3,
                KyaDecision::DenyOrRegister => 4,
            });
        }
        Command::Pass { wallet } => {
            let wallet = match wallet {
                Some(wallet) => address(&wallet, "wallet")?,
                None => own_address().map_err(|error| anyhow!("give a wallet, or {error:#}"))?,
            };
            return pass::show(&settings, style, wallet).await;
        }
        Command::Agent { id } => {
            let details = settings.api()?.agent(agent_id(&id)?).await?;
            show(&details, render::agent(style, &details))?;
        }
        Command::Lineage { id } => {
            let root = settings.api()?.lineage(agent_id(&id)?).await?;
            show(&root, render::lineage(style, &root))?;
        }
        Command::Agents { status, all, page, limit } => {
            let status = status.map(|name| name.parse::<AgentStatus>()).transpose()?;
            if page == 0 || limit == 0 {
                return Err(anyhow!("--page and --limit must be at least 1"));
            }
            let api = settings.api()?;
            if all {
                let agents = api.all_agents(status).await?;
                let value = serde_json::json!({ "total": agents.len(), "data": agents });
                show(&value, render::agents(style, &agents, &render::every_agent_footer(agents.len())))?;
            } else {
                let answer = api.agents_page(page, limit, status).await?;
                show(&answer, render::agents(style, &answer.data, &render::page_footer(&answer)))?;
            }
        }
        Command::Stats => {
            let stats = settings.api()?.stats().await?;
            show(&stats, render::stats(&stats))?;
        }
        Command::Relayer { command: RelayerCommand::Status } => {
            let status = settings.relayer()?.status().await?;
            show(&status, render::relayer_status(&status))?;
        }
        Command::Relay { id } => {
            let relayer = settings.relayer()?;
            let id = id.trim();
            let view = if id.len() == 66 && id.starts_with("0x") {
                let hash: B256 = id.parse().map_err(|_| anyhow!("invalid transaction hash {id:?}"))?;
                relayer.relay_by_hash(hash).await?
            } else {
                relayer.relay(id).await?
            };
            let view = view.ok_or_else(|| anyhow!("relayer answered HTTP 404: Relay not found ({id})"))?;
            show(&view, render::relay(style, &view))?;
        }
        Command::Register(register) => return register::run(&settings, style, &register).await,
        Command::Sign(sign) => return signed::sign(&settings, &sign),
        Command::Fetch(fetch) => return signed::fetch(&settings, &fetch).await,
        Command::Verify(verify) => return signed::verify(&settings, style, &verify).await,
        Command::Watch(watch) => return watch::run(&settings, &watch).await,
        Command::Attest { id, signing } => {
            let signer = settings::signer(&signing)?;
            let write = Write::Attest { agent_id: agent_id(&id)? };
            return write_and_show(&settings, style, &signing, signer, &write, None).await;
        }
        Command::Terminate { id, signing } => {
            let signer = settings::signer(&signing)?;
            let write = Write::Terminate { agent_id: agent_id(&id)? };
            return write_and_show(&settings, style, &signing, signer, &write, None).await;
        }
        Command::InvalidateConsents { through, signing } => {
            let signer = settings::signer(&signing)?;
            let write = match through {
                Some(nonce) => Write::InvalidateConsentsThrough { nonce: U256::from(nonce) },
                None => Write::InvalidateConsents,
            };
            return write_and_show(&settings, style, &signing, signer, &write, None).await;
        }
        Command::ReportRevenue(report) => {
            let agent_id = agent_id(&report.id)?;
            let amount_cents = cents(&report.amount)?;
            let currency = non_empty(&report.currency, "--currency")?;
            let category = non_empty(&report.category, "--category")?;
            let period_end = match &report.period_end {
                Some(text) => settings::time(text, "--period-end")?,
                None => now(),
            };
            let period_start = match &report.period_start {
                Some(text) => settings::time(text, "--period-start")?,
                None => period_end,
            };
            if period_start > period_end {
                return Err(anyhow!("--period-start is after --period-end"));
            }
            let signer = settings::signer(&report.signing)?;
            let write = Write::ReportRevenue(RevenueReport {
                agent_id,
                amount_cents,
                currency,
                category,
                period_start,
                period_end,
            });
            write.check()?;
            return write_and_show(&settings, style, &report.signing, signer, &write, None).await;
        }
    }
    Ok(0)
}

/// The signer's address, for `kya check` without a wallet.
fn own_address() -> Result<alloy::primitives::Address> {
    let signing = Signing {
        key: std::env::var("AGENT_PRIVATE_KEY").ok(),
        keystore: std::env::var_os("AGENT_KEYSTORE").map(Into::into),
        direct: false,
        gas: None,
    };
    Ok(settings::signer(&signing)?.address())
}

fn non_empty(text: &str, what: &str) -> Result<String> {
    let text = text.trim();
    if text.is_empty() {
        return Err(anyhow!("{what} must not be empty"));
    }
    Ok(text.to_owned())
}

fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_secs())
}

/// Sends `write` (relayed, or `--direct`) behind a spinner, prints the outcome; exit code 0 only
/// when the registry call succeeded. `registry`: already resolved (default: as the settings say).
async fn write_and_show(
    settings: &Settings,
    style: Style,
    signing: &Signing,
    signer: alloy::signers::local::PrivateKeySigner,
    write: &Write,
    registry: Option<alloy::primitives::Address>,
) -> Result<i32> {
    let spinner = spinner(settings.json);
    spinner.set_message(format!("{}: preparing", write.name()));
    let outcome = if signing.direct {
        let rpc = settings.rpc()?;
        let registry = match registry {
            Some(registry) => registry,
            None => settings.direct_registry()?,
        };
        spinner.set_message(format!("{}: sending from {} (own gas)", write.name(), signer.address()));
        direct_write(&rpc, signer, registry, write, settings.timeout).await
    } else {
        let relayer = settings.relayer()?;
        // The RPC reads the registry's result from the receipt; without it the outcome still
        // comes from the relayer.
        let rpc = settings.rpc().ok();
        let options = WriteOptions {
            registry: registry.or(settings.registry),
            forwarder: settings.forwarder,
            gas: signing.gas,
            deadline: 0,
            timeout: settings.timeout,
        };
        let name = write.name();
        relay_write(&relayer, rpc.as_ref(), &signer, write, &options, |progress| {
            spinner.set_message(match progress {
                Progress::Preparing => format!("{name}: reading nonce and domain"),
                Progress::Signing => format!("{name}: signing"),
                Progress::Submitted { relay_id: Some(id), .. } => format!("{name}: relay {id} submitted"),
                Progress::Submitted { tx_hash, .. } => {
                    format!("{name}: submitted {}", tx_hash.map(|hash| hash.to_string()).unwrap_or_default())
                }
                Progress::Status(status) => format!("{name}: {status}"),
            });
        })
        .await
    };
    spinner.finish_and_clear();
    let outcome: Outcome = outcome?;
    if settings.json {
        println!("{}", serde_json::to_string_pretty(&outcome)?);
    } else {
        println!("{}", render::outcome(style, write.name(), &outcome));
    }
    if !outcome.succeeded {
        if !settings.json {
            eprintln!(
                "error: {} did not succeed: {}",
                write.name(),
                outcome.revert_reason.as_deref().unwrap_or(&outcome.status)
            );
        }
        return Ok(EXIT_ERROR);
    }
    Ok(0)
}

/// A spinner on stderr while a write settles; hidden with `--json` or without a terminal.
fn spinner(json: bool) -> indicatif::ProgressBar {
    if json || !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let spinner = indicatif::ProgressBar::new_spinner();
    spinner.enable_steady_tick(Duration::from_millis(100));
    spinner
}

/// Anything printable as pretty JSON, behind a trait object (the `show` helper takes any).
mod erased {
    pub(super) trait Json {
        fn to_json(&self) -> serde_json::Result<String>;
    }

    impl<T: super::Serialize> Json for T {
        fn to_json(&self) -> serde_json::Result<String> {
            serde_json::to_string_pretty(self)
        }
    }
}
