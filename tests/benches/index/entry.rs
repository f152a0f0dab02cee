//! The runtime's own entry of a `wrangler dev` Worker, behind wrangler's proxy.
//!
//! A request to `wrangler dev`'s port passes wrangler's proxy Worker (a `workerd` process of its
//! own), then the runtime's entry Worker, then ours: 5 to 20 ms cold here (`docs/bench/index-cold.md`)
//! that no deployed Worker pays, as Cloudflare's edge calls the Worker itself. The runtime that
//! runs our Worker (the `workerd` started with an inspector) listens on its own loopback port,
//! which wrangler prints nowhere: it is found among that process's listening sockets as the one
//! answering our `/health` (which the restart has asked already: the probe warms nothing the
//! measured request would not find warm). Asked there, a cold answer still passes the runtime's entry
//! Worker, but not wrangler's proxy.

use std::{process::Command, time::Duration};

/// The base URL of the runtime's entry serving the Worker whose `wrangler dev` process is `pid`,
/// if one of its descendants answers there.
pub(crate) async fn runtime_entry(pid: u32) -> Option<String> {
    let runtime = kya_tests::processes::worker_runtime(pid)?;
    let http = kya_tests::http_client();
    for port in listening_ports(runtime) {
        let base = format!("http://127.0.0.1:{port}");
        let answer = http.get(format!("{base}/health")).timeout(Duration::from_secs(10)).send().await;
        let Ok(answer) = answer else { continue };
        let json = answer
            .headers()
            .get("content-type")
            .is_some_and(|value| value.to_str().is_ok_and(|value| value.starts_with("application/json")));
        if answer.status().as_u16() == 200 && json {
            return Some(base);
        }
    }
    None
}

/// The loopback TCP ports `pid` listens on (`ss -ltnp`).
fn listening_ports(pid: u32) -> Vec<u16> {
    let Ok(output) = Command::new("ss").args(["-ltnpH"]).output() else { return Vec::new() };
    let marker = format!("pid={pid},");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|line| line.contains(&marker))
        .filter_map(|line| line.split_whitespace().nth(3))
        .filter_map(|address| address.rsplit_once(':').and_then(|(_, port)| port.parse().ok()))
        .collect()
}
