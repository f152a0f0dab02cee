//! Budget pacing, pure: the day's budget opens in equal slices of its window (`BUDGET_SLICES`,
//! default 24: one an hour), and what earlier slices left unspent stays open. A crowd of clients
//! spending their shares at once can then spend what is open, not the day: the relayer is closed
//! for at most the rest of a slice. One slice turns pacing off (the whole budget is open at once).
//!
//! Times are Unix seconds passed in; the store keeps the window's start and what was used, the
//! caller compares.

use std::num::NonZeroU64;

/// How a budget window opens: its length and its number of slices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pacing {
    /// Seconds a budget window lasts after its first use (a day, `BUDGET_WINDOW_SECS`).
    pub window_secs: u64,
    /// Equal slices the window opens in (`BUDGET_SLICES`).
    pub slices: NonZeroU64,
}

impl Pacing {
    /// The whole budget open at once, over a window of `window_secs`.
    pub fn off(window_secs: u64) -> Self {
        Self { window_secs, slices: NonZeroU64::MIN }
    }

    /// The slice (0 for the first) running at `now` in the window that started at
    /// `window_start`. Slice `k` starts `⌈k × window ÷ slices⌉` seconds into the window, so
    /// slices of a window that does not divide evenly differ by at most a second, and the last
    /// runs until the window ends (and on, should `now` be past it: the store resets first).
    fn slice_at(&self, window_start: u64, now: u64) -> u64 {
        let slices = self.slices.get();
        let into = u128::from(now.saturating_sub(window_start));
        let slice = into * u128::from(slices) / u128::from(self.window_secs.max(1));
        (slice.min(u128::from(slices - 1))) as u64
    }

    /// When slice `k` of the window that started at `window_start` opens.
    fn slice_start(&self, window_start: u64, k: u64) -> u64 {
        let offset = (u128::from(k) * u128::from(self.window_secs)).div_ceil(u128::from(self.slices.get()));
        window_start.saturating_add(offset as u64)
    }

    /// How much of `total_wei` is open at `now` in the window that started at `window_start`
    /// (`None`: no window runs, so the first use starts one now and its first slice is open):
    /// the slices opened so far, unspent ones carried over, rounded down. The last slice opens
    /// the whole of `total_wei`.
    pub fn open_wei(&self, total_wei: u128, window_start: Option<u64>, now: u64) -> u128 {
        let slices = self.slices.get();
        let opened = window_start.map_or(0, |start| self.slice_at(start, now)) + 1;
        if opened >= slices {
            return total_wei;
        }
        // ⌊total × opened ÷ slices⌋ without overflow: opened < slices, so each part fits.
        let (opened, slices) = (u128::from(opened), u128::from(slices));
        total_wei / slices * opened + total_wei % slices * opened / slices
    }

    /// When the next slice opens, in the window that started at `window_start`; `None` when no
    /// window runs, the last slice is open, or there is one slice.
    pub fn next_slice_at(&self, window_start: Option<u64>, now: u64) -> Option<u64> {
        let start = window_start?;
        let next = self.slice_at(start, now) + 1;
        (next < self.slices.get()).then(|| self.slice_start(start, next))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: u64 = 24 * 60 * 60;
    const HOUR: u64 = 60 * 60;
    const HOURLY: Pacing = Pacing { window_secs: DAY, slices: NonZeroU64::new(24).unwrap() };

    #[test]
    fn a_window_opens_its_first_slice_at_its_start() {
        // No window yet: the first use starts one, with its first slice open.
        assert_eq!(HOURLY.open_wei(2_400, None, 1_000), 100);
        assert_eq!(HOURLY.next_slice_at(None, 1_000), None);
        // At the very start and one second before the next slice.
        assert_eq!(HOURLY.open_wei(2_400, Some(1_000), 1_000), 100);
        assert_eq!(HOURLY.open_wei(2_400, Some(1_000), 1_000 + HOUR - 1), 100);
        assert_eq!(HOURLY.next_slice_at(Some(1_000), 1_000), Some(1_000 + HOUR));
        assert_eq!(HOURLY.next_slice_at(Some(1_000), 1_000 + HOUR - 1), Some(1_000 + HOUR));
    }

    #[test]
    fn each_slice_adds_to_what_earlier_ones_left() {
        assert_eq!(HOURLY.open_wei(2_400, Some(0), HOUR), 200);
        assert_eq!(HOURLY.next_slice_at(Some(0), HOUR), Some(2 * HOUR));
        // A quiet morning: nothing spent for ten hours leaves eleven slices open at once.
        assert_eq!(HOURLY.open_wei(2_400, Some(0), 10 * HOUR + 5), 1_100);
        assert_eq!(HOURLY.next_slice_at(Some(0), 10 * HOUR + 5), Some(11 * HOUR));
    }

    #[test]
    fn the_last_slice_opens_the_whole_budget_and_has_no_next() {
        assert_eq!(HOURLY.open_wei(2_401, Some(0), 23 * HOUR - 1), 2_401 * 23 / 24);
        assert_eq!(HOURLY.open_wei(2_401, Some(0), 23 * HOUR), 2_401);
        assert_eq!(HOURLY.next_slice_at(Some(0), 23 * HOUR - 1), Some(23 * HOUR));
        assert_eq!(HOURLY.next_slice_at(Some(0), 23 * HOUR), None);
        // Past the window's end (the store resets before asking) it stays whole.
        assert_eq!(HOURLY.open_wei(2_401, Some(0), DAY + 7), 2_401);
        assert_eq!(HOURLY.next_slice_at(Some(0), DAY + 7), None);
    }

    #[test]
    fn one_slice_turns_pacing_off() {
        let off = Pacing::off(DAY);
        for (start, now) in [(None, 0), (Some(0), 0), (Some(0), HOUR), (Some(0), DAY - 1)] {
            assert_eq!(off.open_wei(1_000, start, now), 1_000);
            assert_eq!(off.next_slice_at(start, now), None);
        }
    }

    #[test]
    fn amounts_round_down_and_never_overflow() {
        assert_eq!(HOURLY.open_wei(23, Some(0), 0), 0);
        assert_eq!(HOURLY.open_wei(25, Some(0), HOUR), 2);
        let most = u128::MAX;
        assert_eq!(HOURLY.open_wei(most, Some(0), 11 * HOUR), most / 24 * 12 + most % 24 * 12 / 24);
        assert_eq!(HOURLY.open_wei(most, Some(0), 23 * HOUR), most);
    }

    #[test]
    fn a_window_that_does_not_divide_evenly_opens_its_slices_on_whole_seconds() {
        // 100 s in 3 slices: they open 0, 34 and 67 s in (⌈100 k ÷ 3⌉).
        let odd = Pacing { window_secs: 100, slices: NonZeroU64::new(3).unwrap() };
        assert_eq!(odd.next_slice_at(Some(10), 10), Some(44));
        assert_eq!(odd.open_wei(3, Some(10), 43), 1);
        assert_eq!(odd.open_wei(3, Some(10), 44), 2);
        assert_eq!(odd.next_slice_at(Some(10), 44), Some(77));
        assert_eq!(odd.open_wei(3, Some(10), 76), 2);
        assert_eq!(odd.open_wei(3, Some(10), 77), 3);
        // The time a refusal names is the time the slice opens: never a second early.
        for now in 10..110 {
            if let Some(next) = odd.next_slice_at(Some(10), now) {
                assert!(odd.open_wei(3, Some(10), next) > odd.open_wei(3, Some(10), now), "at {now}");
                assert_eq!(odd.open_wei(3, Some(10), next - 1), odd.open_wei(3, Some(10), now), "at {now}");
            }
        }
    }
}
