//! What responses have said of one dimension's window: how long it is,
//! and whether its server counts by continuous refill or by window.

use core::time::Duration;

use super::hold::MAX_HOLD;

/// The window assumed for a limit whose headers say nothing of it (OpenAI
/// and Anthropic count per minute).
const MINUTE: Duration = Duration::from_secs(60);

/// What responses have said of a dimension's window.
#[derive(Default, Clone, Copy)]
pub(super) struct Window {
    /// The longest reset seen: a window is at least that long.
    pub(super) longest_reset: Duration,
    /// The longest a window may be, as far as the resets seen say: each
    /// reset counted from when its request left when it was an instant
    /// (from the response, it reads short by the answer's time). What the
    /// upstream sent stays counted this long.
    pub(super) longest_bound: Duration,
    /// The shortest window that a continuous refill would explain, from
    /// readings with 2 or more missing.
    refill: Option<Duration>,
    /// The same from the readings with 1 missing, until there are others.
    refill_one: Option<Duration>,
    /// The longest window that a continuous refill would explain, from
    /// each reading: a refill's window lies between the two.
    refill_low: Duration,
    /// A reading no continuous refill explains: the server counts by window.
    pub(super) windowed: bool,
}

impl Window {
    /// Takes a reading (limit `l`, `remaining`, `reset`) in: the window it
    /// suggests. A continuous refill whole in `reset` with `l - remaining`
    /// missing refills over `reset · l / (l - remaining)`; a fixed or
    /// rolling window resets within its window. The larger of the two
    /// estimates is the window, the refill's the smallest seen, so that a
    /// window counted from its start, which makes it look long, is soon
    /// corrected.
    ///
    /// A refilling server rounds what is left down (19.9 reads 19), so
    /// that `m` missing may be as little as `m - 1` and a bit: the refill
    /// read is the longest the reading allows, `reset · l / (m - 1)`, or a
    /// requests window of 2 s reads as 1.4 s and its 429s follow. A
    /// reading of 1 missing bounds nothing that way; it counts (as `m`)
    /// until a reading of more comes.
    ///
    /// `bound`: the reset counted from when the request left, if longer
    /// (an instant's): the refill's upper estimates take it, the lower
    /// ones the reset less `rounding` (what the server may have rounded it
    /// up by), so that neither a slow answer nor a rounded reset makes a
    /// refill look like a window.
    pub(super) fn read(
        &mut self,
        l: u64,
        remaining: Option<u64>,
        reset: Option<Duration>,
        bound: Option<Duration>,
        rounding: Duration,
    ) -> Duration {
        if let Some(reset) = reset.filter(|r| !r.is_zero()) {
            let reset = reset.min(MAX_HOLD);
            self.longest_reset = self.longest_reset.max(reset);
            let bound = bound.map_or(reset, |b| b.clamp(reset, MAX_HOLD));
            self.longest_bound = self.longest_bound.max(bound);
            let missing = remaining.map_or(0, |r| l.saturating_sub(r));
            let over = |reset: Duration, m: u64| {
                let ns = reset.as_nanos() * u128::from(l) / u128::from(m);
                Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX)).min(MAX_HOLD)
            };
            // A refill is at most what the reset counted from when its
            // request left says, at least what it says from the response.
            let refill = |m: u64| over(bound, m);
            if missing > 0 {
                // Whole in `reset` less what it was rounded up by, with at
                // most `missing` missing: at least this window.
                let low = over(reset.saturating_sub(rounding), missing);
                self.refill_low = self.refill_low.max(low);
            }
            match missing {
                0 => {}
                1 => {
                    let r = refill(1);
                    self.refill_one = Some(self.refill_one.map_or(r, |old| old.min(r)));
                }
                m => {
                    let r = refill(m - 1);
                    self.refill = Some(self.refill.map_or(r, |old| old.min(r)));
                    // A refill whole in `reset` spends at most `reset` per
                    // `m - 1` of the limit; a window (rolling or fixed) is
                    // whole sooner, as its end comes nearer, than a refill
                    // at the rate its longest reset says. The margin: a
                    // reset rounded up to the millisecond.
                    let margin = self.longest_reset / 128 + Duration::from_millis(2);
                    self.windowed |= r + margin < self.longest_reset;
                }
            }
            // Two readings no single refill explains (a server writes its
            // headers as it admits: a rolling window's reset is its window
            // whatever is missing).
            if let Some(high) = self.refill.filter(|&r| r < MAX_HOLD) {
                self.windowed |= self.refill_low > high + high / 64;
            }
        }
        match self.refill.or(self.refill_one) {
            Some(refill) => refill.max(self.longest_reset),
            // Until a refill is seen: a minute, unless a reset says longer.
            None => self.longest_reset.max(MINUTE),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_continuous_refill_is_read_from_one_response() {
        let mut w = Window::default();
        let read = w.read(20, Some(19), Some(Duration::from_millis(100)), None, MS);
        assert_eq!(read, Duration::from_secs(2));
    }

    #[test]
    fn a_fixed_window_seen_from_its_start_is_corrected_by_later_responses() {
        let mut w = Window::default();
        // 2 s windows: 1 spent at its start, then 10 halfway through.
        let first = w.read(20, Some(19), Some(Duration::from_secs(2)), None, MS);
        assert_eq!(first, Duration::from_secs(40), "looks like a slow refill");
        let later = w.read(20, Some(10), Some(Duration::from_secs(1)), None, MS);
        assert_eq!(
            later.as_millis(),
            2222,
            "1 s for 9 and a bit: at most 20/9 s"
        );
        let end = w.read(20, Some(0), Some(Duration::from_millis(100)), None, MS);
        assert_eq!(end.as_millis(), 2000, "never below the longest reset");
    }

    #[test]
    fn a_refill_that_rounds_what_is_left_down_never_reads_shorter() {
        // 20 per 2 s, 18.9 left (it reads 18), whole in 110 ms.
        let mut w = Window::default();
        let read = w.read(20, Some(18), Some(Duration::from_millis(110)), None, MS);
        assert!(read >= Duration::from_secs(2), "{read:?}, not 1.1 s");
    }

    #[test]
    fn a_reading_without_reset_assumes_a_minute() {
        let mut w = Window::default();
        assert_eq!(w.read(500, Some(499), None, None, MS), MINUTE);
        assert_eq!(w.read(500, None, Some(Duration::MAX), None, MS), MAX_HOLD);
    }

    const MS: Duration = Duration::from_millis(1);
    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn a_refill_read_from_instants_after_slow_answers_is_no_window() {
        // 3 000 tokens per 2 s refilling at 1 500 a second, its resets
        // instants (Anthropic's): each read 50–150 ms after its request
        // reached the server, 1 ms after it left. From the response, the
        // first (200 missing, whole in 133 ms) read after 120 ms says a
        // refill of 0.2 s; the last of the burst (3 000 missing) 2 s.
        let mut w = Window::default();
        let read = |w: &mut Window, missing: u64, answer_ms: u32| {
            let whole = Duration::from_secs_f64(missing as f64 / 1500.0);
            let reset = whole.saturating_sub(answer_ms * MS);
            w.read(
                3000,
                Some(3000 - missing),
                Some(reset),
                Some(whole + MS),
                MS,
            );
        };
        read(&mut w, 200, 120);
        for (i, missing) in (400..=3000).step_by(200).enumerate() {
            read(&mut w, missing, 50 + (i as u32 * 37) % 100);
            assert!(!w.windowed, "{missing} missing");
        }
    }

    #[test]
    fn a_refill_read_in_whole_seconds_is_no_window_and_a_rolling_one_is() {
        // 3 000 tokens per 2 s, `t` rounded up to the second (the IETF's):
        // a refill missing 200 whole in 133 ms reads `t=1`.
        let seconds = |missing: u64| {
            let whole = Duration::from_secs_f64(missing as f64 / 1500.0);
            Some(Duration::from_secs(
                whole.as_nanos().div_ceil(1_000_000_000) as u64,
            ))
        };
        let mut w = Window::default();
        for missing in (200..=3000).step_by(200) {
            w.read(3000, Some(3000 - missing), seconds(missing), None, SECOND);
            assert!(!w.windowed, "{missing} missing");
        }
        // A rolling window: whole in its 2 s, whatever is missing.
        let mut w = Window::default();
        for missing in [200, 3000] {
            w.read(3000, Some(3000 - missing), Some(2 * SECOND), None, SECOND);
        }
        assert!(w.windowed);
    }

    #[test]
    fn a_refill_server_is_never_read_as_a_window() {
        // 3 000 per 2 s refilling at 1 500 a second, read as the server
        // writes them (what is left rounded down, resets rounded up to the
        // millisecond) as it admits 200 at a time, refilling between.
        let mut w = Window::default();
        let mut level = 3000.0_f64;
        for i in 0..60 {
            level = (level + 1500.0 * 0.037 * f64::from(i % 3)).min(3000.0) - 200.0;
            if level < 0.0 {
                level += 200.0;
                continue;
            }
            let reset = Duration::from_secs_f64((3000.0 - level) / 1500.0);
            let reset = Duration::from_millis(reset.as_nanos().div_ceil(1_000_000) as u64);
            w.read(3000, Some(level as u64), Some(reset), None, MS);
            assert!(!w.windowed, "reading {i}: {level} left, whole in {reset:?}");
        }
    }

    #[test]
    fn a_rolling_window_is_read_from_two_readings_no_refill_explains() {
        // Written as the server admits: the request just admitted leaves
        // the window last, whole a window later whatever is missing.
        let mut w = Window::default();
        w.read(3000, Some(2800), Some(2000 * MS), None, MS);
        assert!(!w.windowed, "one reading: a 30 s refill, for all it says");
        w.read(3000, Some(0), Some(2000 * MS), None, MS);
        assert!(
            w.windowed,
            "200 missing and 3 000 missing, both whole in 2 s"
        );
    }

    #[test]
    fn a_fixed_window_is_read_as_its_end_comes_nearer() {
        let mut w = Window::default();
        w.read(20, Some(19), Some(1900 * MS), None, MS);
        w.read(20, Some(5), Some(1850 * MS), None, MS);
        assert!(
            w.windowed,
            "15 missing and 1 missing, whole within 50 ms of each other"
        );
        // Read from a window's end: whole sooner than its refill allows.
        let mut w = Window::default();
        w.read(20, Some(0), Some(2000 * MS), None, MS);
        w.read(20, Some(0), Some(1000 * MS), None, MS);
        assert!(w.windowed, "all missing, whole in 2 s and then in 1 s");
    }
}
