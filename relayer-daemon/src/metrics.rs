//! Prometheus metrics: relays accepted and rejected by reason, budget and balance gauges,
//! rendered as the text exposition format (no registry crate needed for a handful of series).

use std::{
    collections::BTreeMap,
    fmt::Write,
    sync::{
        Mutex,
        atomic::{AtomicU64, Ordering},
    },
};

/// Counters kept since the process started.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    accepted: AtomicU64,
    rejected: Mutex<BTreeMap<&'static str, u64>>,
}

/// Point-in-time values read when the metrics are scraped.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Gauges {
    /// Budget limit in wei.
    pub(crate) budget_limit_wei: u128,
    /// Budget used in wei (reservations at their worst case).
    pub(crate) budget_used_wei: u128,
    /// Outstanding reservations in wei.
    pub(crate) budget_pending_wei: u128,
    /// Relayer balance in wei, if the node answered.
    pub(crate) balance_wei: Option<u128>,
}

impl Metrics {
    /// Counts an accepted relay.
    pub(crate) fn accepted(&self) {
        self.accepted.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a rejected relay under `reason`.
    pub(crate) fn rejected(&self, reason: &'static str) {
        let mut rejected = self.rejected.lock().unwrap_or_else(|p| p.into_inner());
        *rejected.entry(reason).or_default() += 1;
    }

    /// The Prometheus text exposition.
    pub(crate) fn render(&self, gauges: &Gauges) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "# HELP relayer_relays_accepted_total Relays sent to the chain.");
        let _ = writeln!(out, "# TYPE relayer_relays_accepted_total counter");
        let _ = writeln!(out, "relayer_relays_accepted_total {}", self.accepted.load(Ordering::Relaxed));
        let _ = writeln!(out, "# HELP relayer_relays_rejected_total Relays refused, by reason.");
        let _ = writeln!(out, "# TYPE relayer_relays_rejected_total counter");
        let rejected = self.rejected.lock().unwrap_or_else(|p| p.into_inner());
        for (reason, count) in rejected.iter() {
            let _ = writeln!(out, "relayer_relays_rejected_total{{reason=\"{reason}\"}} {count}");
        }
        let gauges_list = [
            ("relayer_budget_limit_wei", "Daily gas budget in wei.", Some(gauges.budget_limit_wei)),
            (
                "relayer_budget_used_wei",
                "Budget used in the current window, in wei (reservations at worst case).",
                Some(gauges.budget_used_wei),
            ),
            (
                "relayer_budget_pending_wei",
                "Reservations awaiting their receipt, in wei.",
                Some(gauges.budget_pending_wei),
            ),
            ("relayer_balance_wei", "Relayer wallet balance in wei.", gauges.balance_wei),
        ];
        for (name, help, value) in gauges_list {
            let Some(value) = value else { continue };
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} gauge");
            let _ = writeln!(out, "{name} {value}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_by_reason_and_gauges() {
        let metrics = Metrics::default();
        metrics.accepted();
        metrics.rejected("invalid_signature");
        metrics.rejected("invalid_signature");
        let text = metrics.render(&Gauges {
            budget_limit_wei: 5,
            budget_used_wei: 3,
            budget_pending_wei: 1,
            balance_wei: None,
        });
        assert!(text.contains("relayer_relays_accepted_total 1\n"));
        assert!(text.contains("relayer_relays_rejected_total{reason=\"invalid_signature\"} 2\n"));
        assert!(text.contains("relayer_budget_used_wei 3\n"));
        assert!(!text.contains("relayer_balance_wei"));
    }
}
