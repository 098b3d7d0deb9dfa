//! A dimension whose server counts by window (a rolling window, or fixed
//! windows) rather than by continuous refill: a log of what was sent and
//! when each part is free again, so that an attempt starts when the
//! window's spend allows it.
//!
//! A refilling estimate frees a little of the limit at every instant; a
//! window frees nothing until what it counted leaves it (rolling) or it
//! ends (fixed), and an attempt sent on the refill's word meets a 429. The
//! log keeps each attempt sent (its cost, when it is free again); the
//! pace's one waiter asks it when its cost fits. An attempt sent
//! at `t` is free at `t` plus the window (and a margin for its way to the
//! server): exact for a rolling window, and never early for a fixed one,
//! whose boundary comes at most a window after it. Servers write their
//! headers when they admit a request, its generation before the response
//! is read: a response's reset cannot say when the attempts sent meanwhile
//! are free, only what the server counted then, which a log that counts
//! less takes in.
//!
//! The log is locked for each admission: only dimensions known to be
//! counted by window keep one.
//!
//! What responses have said of one dimension's window ([`Window`]): how
//! long it is, and whether its server counts by continuous refill or by
//! window.

use core::time::Duration;
use std::collections::VecDeque;

use super::hold::MAX_HOLD;

/// The most entries kept: beyond it the two that leave first are merged
/// (the cost of both, free when the later is), which only ever frees later.
const MAX_ENTRIES: usize = 1024;

/// What one attempt spent of a windowed dimension, counted until `free_at`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Sent {
    free_at: u64,
    cost: u64,
}

/// The log of one dimension: what the server still counts, the earliest
/// free first. Times are the pacer's nanoseconds.
#[derive(Debug)]
pub(super) struct Log {
    entries: VecDeque<Sent>,
    /// How long an attempt counts from when it was sent: the longest
    /// reset seen, and a margin for the request's way there.
    window: u64,
}

impl Log {
    /// A log whose server counted `spent` at `now`, all of it free by
    /// `whole_at`.
    pub(super) fn new(now: u64, spent: u64, whole_at: u64, window: u64) -> Log {
        let mut log = Log {
            entries: VecDeque::new(),
            window: window.max(1),
        };
        if spent > 0 && whole_at > now {
            log.insert(Sent {
                free_at: whole_at,
                cost: spent,
            });
        }
        log
    }

    pub(super) fn set_window(&mut self, window: u64) {
        self.window = window.max(1);
    }

    /// When `cost` (of a dimension limited to `limit`) fits, at `now` or
    /// later: once what leaves first leaves room for it (a cost above the
    /// limit waits for the log to empty).
    pub(super) fn earliest(&mut self, now: u64, cost: u64, limit: u64) -> u64 {
        self.prune(now);
        let cost = cost.min(limit);
        let mut spent: u64 = self.entries.iter().map(|e| e.cost).sum();
        let mut at = now;
        for e in &self.entries {
            if spent.saturating_add(cost) <= limit {
                break;
            }
            spent -= e.cost;
            at = e.free_at;
        }
        at
    }

    /// An attempt of `cost` sent at `now`: counted for a window from now.
    pub(super) fn send(&mut self, now: u64, cost: u64) -> Sent {
        let sent = Sent {
            free_at: now.saturating_add(self.window),
            cost,
        };
        self.insert(sent);
        sent
    }

    /// A send whose attempt did not start after all.
    pub(super) fn take_back(&mut self, sent: Sent) {
        if let Some(i) = self.entries.iter().rposition(|e| *e == sent) {
            self.entries.remove(i);
        }
    }

    /// A response read at `now`: the server had `remaining` left when it
    /// admitted the request (before `now`), all of it free by `whole_at`.
    /// What it counted beyond everything the log counts (another client's
    /// spend) is added, free then. What the log counts beyond the server
    /// stays (an attempt that met a 429, say): which one the server did
    /// not count is not known, and freeing one that it did would be early.
    pub(super) fn read(&mut self, now: u64, remaining: u64, whole_at: u64, limit: u64) {
        self.prune(now);
        let counted: u64 = self.entries.iter().map(|e| e.cost).sum();
        let spent = limit.saturating_sub(remaining.min(limit));
        if spent > counted && whole_at > now {
            self.insert(Sent {
                free_at: whole_at,
                cost: spent - counted,
            });
        }
    }

    /// What is left at `now`.
    pub(super) fn level(&self, now: u64, limit: u64) -> u64 {
        let spent: u64 = self
            .entries
            .iter()
            .filter(|e| e.free_at > now)
            .map(|e| e.cost)
            .sum();
        limit.saturating_sub(spent)
    }

    fn prune(&mut self, now: u64) {
        while self.entries.front().is_some_and(|e| e.free_at <= now) {
            self.entries.pop_front();
        }
    }

    fn insert(&mut self, sent: Sent) {
        if self.entries.len() >= MAX_ENTRIES
            && let Some(first) = self.entries.pop_front()
            && let Some(second) = self.entries.front_mut()
        {
            second.cost = second.cost.saturating_add(first.cost);
        }
        let at = self.entries.partition_point(|e| e.free_at <= sent.free_at);
        self.entries.insert(at, sent);
    }
}

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

    const MS: u64 = 1_000_000;
    const S: u64 = 1_000 * MS;

    /// 3 000 a 2 s window, nothing counted yet.
    fn fresh() -> Log {
        Log::new(0, 0, 0, 2 * S)
    }

    /// Sends `cost` when it fits, from `now` on: when it went.
    fn send(log: &mut Log, now: u64, cost: u64) -> u64 {
        let at = log.earliest(now, cost, 3000);
        log.send(at, cost);
        at
    }

    #[test]
    fn a_full_window_frees_what_it_counted_a_window_after_it_was_sent() {
        let mut log = fresh();
        for _ in 0..15 {
            assert_eq!(send(&mut log, 0, 200), 0);
        }
        assert_eq!(
            log.earliest(100 * MS, 200, 3000),
            2 * S,
            "not on a refill's word (133 ms)"
        );
        assert_eq!(
            send(&mut log, 100 * MS, 2801),
            2 * S,
            "a cost near the limit waits for all of it"
        );
        assert_eq!(log.earliest(2 * S, 200, 3000), 4 * S, "and spends it");
    }

    #[test]
    fn what_the_server_counts_beyond_the_log_is_added_free_at_its_reset() {
        let mut log = fresh();
        log.read(0, 1000, 2 * S, 3000);
        assert_eq!(log.level(0, 3000), 1000, "another client's 2 000");
        assert_eq!(log.level(2 * S, 3000), 3000);
        assert_eq!(log.earliest(0, 1001, 3000), 2 * S);
        assert_eq!(log.earliest(0, 1000, 3000), 0);
        // What the log counts beyond the server stays counted.
        let mut log = fresh();
        send(&mut log, 0, 1000);
        send(&mut log, 10 * MS, 1000);
        log.read(100 * MS, 2000, 2 * S, 3000);
        assert_eq!(log.level(100 * MS, 3000), 1000);
        assert_eq!(log.level(2010 * MS, 3000), 3000);
    }

    #[test]
    fn a_send_taken_back_frees_its_cost_and_no_other() {
        let mut log = fresh();
        let first = log.send(0, 1500);
        let second = log.send(0, 1500);
        assert_eq!(first, second, "two alike");
        log.take_back(second);
        assert_eq!(log.level(0, 3000), 1500, "one of the two, once");
        log.take_back(Sent {
            free_at: 7,
            cost: 1500,
        });
        assert_eq!(log.level(0, 3000), 1500, "none that is not there");
    }

    #[test]
    fn a_cost_above_the_limit_waits_for_the_log_to_empty() {
        let mut log = fresh();
        send(&mut log, 0, 10);
        send(&mut log, 5 * MS, 10);
        assert_eq!(log.earliest(S, 5000, 3000), 2 * S + 5 * MS);
    }

    #[test]
    fn a_long_log_merges_what_leaves_first_never_freeing_earlier() {
        let mut log = Log::new(0, 0, 0, 2 * S);
        for i in 0..(MAX_ENTRIES as u64 + 10) {
            send(&mut log, i, 1);
        }
        assert!(log.entries.len() <= MAX_ENTRIES);
        assert_eq!(log.level(2 * S + 10, 3000), 3000 - (MAX_ENTRIES as u64 - 1));
        assert!(log.earliest(2000, 3000, 3000) >= 2 * S + MAX_ENTRIES as u64);
    }

    #[test]
    fn a_continuous_refill_is_read_from_one_response() {
        let mut w = Window::default();
        let read = w.read(20, Some(19), Some(Duration::from_millis(100)), None, ONE_MS);
        assert_eq!(read, Duration::from_secs(2));
    }

    #[test]
    fn a_fixed_window_seen_from_its_start_is_corrected_by_later_responses() {
        let mut w = Window::default();
        // 2 s windows: 1 spent at its start, then 10 halfway through.
        let first = w.read(20, Some(19), Some(Duration::from_secs(2)), None, ONE_MS);
        assert_eq!(first, Duration::from_secs(40), "looks like a slow refill");
        let later = w.read(20, Some(10), Some(Duration::from_secs(1)), None, ONE_MS);
        assert_eq!(
            later.as_millis(),
            2222,
            "1 s for 9 and a bit: at most 20/9 s"
        );
        let end = w.read(20, Some(0), Some(Duration::from_millis(100)), None, ONE_MS);
        assert_eq!(end.as_millis(), 2000, "never below the longest reset");
    }

    #[test]
    fn a_refill_that_rounds_what_is_left_down_never_reads_shorter() {
        // 20 per 2 s, 18.9 left (it reads 18), whole in 110 ms.
        let mut w = Window::default();
        let read = w.read(20, Some(18), Some(Duration::from_millis(110)), None, ONE_MS);
        assert!(read >= Duration::from_secs(2), "{read:?}, not 1.1 s");
    }

    #[test]
    fn a_reading_without_reset_assumes_a_minute() {
        let mut w = Window::default();
        assert_eq!(w.read(500, Some(499), None, None, ONE_MS), MINUTE);
        assert_eq!(
            w.read(500, None, Some(Duration::MAX), None, ONE_MS),
            MAX_HOLD
        );
    }

    const ONE_MS: Duration = Duration::from_millis(1);
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
            let reset = whole.saturating_sub(answer_ms * ONE_MS);
            w.read(
                3000,
                Some(3000 - missing),
                Some(reset),
                Some(whole + ONE_MS),
                ONE_MS,
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
            w.read(3000, Some(level as u64), Some(reset), None, ONE_MS);
            assert!(!w.windowed, "reading {i}: {level} left, whole in {reset:?}");
        }
    }

    #[test]
    fn a_rolling_window_is_read_from_two_readings_no_refill_explains() {
        // Written as the server admits: the request just admitted leaves
        // the window last, whole a window later whatever is missing.
        let mut w = Window::default();
        w.read(3000, Some(2800), Some(2000 * ONE_MS), None, ONE_MS);
        assert!(!w.windowed, "one reading: a 30 s refill, for all it says");
        w.read(3000, Some(0), Some(2000 * ONE_MS), None, ONE_MS);
        assert!(
            w.windowed,
            "200 missing and 3 000 missing, both whole in 2 s"
        );
    }

    #[test]
    fn a_fixed_window_is_read_as_its_end_comes_nearer() {
        let mut w = Window::default();
        w.read(20, Some(19), Some(1900 * ONE_MS), None, ONE_MS);
        w.read(20, Some(5), Some(1850 * ONE_MS), None, ONE_MS);
        assert!(
            w.windowed,
            "15 missing and 1 missing, whole within 50 ms of each other"
        );
        // Read from a window's end: whole sooner than its refill allows.
        let mut w = Window::default();
        w.read(20, Some(0), Some(2000 * ONE_MS), None, ONE_MS);
        w.read(20, Some(0), Some(1000 * ONE_MS), None, ONE_MS);
        assert!(w.windowed, "all missing, whole in 2 s and then in 1 s");
    }
}
