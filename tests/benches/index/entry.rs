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

use std::{collections::HashMap, process::Command, time::Duration};

/// The base URL of the runtime's entry serving the Worker whose `wrangler dev` process is `pid`,
/// if one of its descendants answers there.
pub(crate) async fn runtime_entry(pid: u32) -> Option<String> {
    let runtime = descendants(pid).into_iter().find(|&child| {
        let cmdline = std::fs::read(format!("/proc/{child}/cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline);
        cmdline.contains("workerd") && cmdline.contains("--inspector-addr")
    })?;
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

/// Every process descended from `pid` (`/proc/*/stat`'s parent ids).
fn descendants(pid: u32) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // The parent id is the second field after the command's closing parenthesis.
        let parent = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1));
        if let Some(parent) = parent.and_then(|parent| parent.parse::<u32>().ok()) {
            children.entry(parent).or_default().push(child);
        }
    }
    let (mut found, mut queue) = (Vec::new(), vec![pid]);
    while let Some(next) = queue.pop() {
        for &child in children.get(&next).map_or(&[][..], Vec::as_slice) {
            found.push(child);
            queue.push(child);
        }
    }
    found
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
