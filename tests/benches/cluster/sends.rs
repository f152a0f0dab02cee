//! Where the keys' sends spent their time in a row: each daemon's `relayer_send_seconds_total`
//! (waiting for the key's lock, asking the nonce, recording, submitting) and
//! `relayer_sends_timed_total`, read from its metrics listener after the checks and summed over
//! the row's daemons. Recording and submitting are spent holding the key's lock: they bound one
//! key's rate.

use crate::daemons::Cluster;

/// The row's sends and the milliseconds each phase took per send, on average.
#[derive(Debug, Clone, Default)]
pub(crate) struct SendPhases {
    pub(crate) sends: u64,
    /// `(phase, milliseconds per send)`, in the daemon's order.
    pub(crate) per_send_ms: Vec<(String, f64)>,
}

impl SendPhases {
    /// `waiting 120.3 ms, nonce 0.1 ms, recording 4.2 ms, submitting 51.0 ms per send (600 sends)`.
    pub(crate) fn words(&self) -> String {
        let phases: Vec<String> =
            self.per_send_ms.iter().map(|(phase, ms)| format!("{phase} {ms:.1} ms")).collect();
        format!("{} per send ({} sends)", phases.join(", "), self.sends)
    }
}

/// Reads and sums the daemons' send timings.
pub(crate) async fn read(cluster: &Cluster) -> SendPhases {
    let mut sends = 0u64;
    let mut seconds: Vec<(String, f64)> = Vec::new();
    for daemon in &cluster.daemons {
        let (status, text) = daemon.client.metrics().await;
        assert_eq!(status, 200, "{text}");
        for line in text.lines() {
            if let Some(count) = line.strip_prefix("relayer_sends_timed_total ") {
                sends += count.trim().parse::<u64>().unwrap_or(0);
            } else if let Some(rest) = line.strip_prefix("relayer_send_seconds_total{phase=\"")
                && let Some((phase, value)) = rest.split_once("\"} ")
            {
                let value: f64 = value.trim().parse().unwrap_or(0.0);
                match seconds.iter_mut().find(|(name, _)| name == phase) {
                    Some((_, sum)) => *sum += value,
                    None => seconds.push((phase.to_owned(), value)),
                }
            }
        }
    }
    let per_send_ms =
        seconds.into_iter().map(|(phase, sum)| (phase, 1000.0 * sum / sends.max(1) as f64)).collect();
    SendPhases { sends, per_send_ms }
}
