//! Streamed answers that break and can be resumed, as a provider's that
//! offers a way back: each event numbered (`id: N`), a request that asks
//! for the events after one (`?starting_after=N`, OpenAI's Responses API
//! shape), or one that carries the text so far and gets the rest (a
//! continuation). The first responses of each stream break at a point
//! drawn from a seed: cut (a FIN mid-body) or stalled (nothing more, the
//! connection kept open).
//!
//! One stream is one id, in the path: `/cursor/{id}` or `/continue/{id}`.
//! The answer of stream `id` is [`Resumable::text`], event `i` of it
//! [`Resumable::event`]. A continuation whose body is not a prefix of the
//! answer made of whole events (text lost or repeated) is refused with
//! `409 Conflict`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::sse::{Ended, Step, play};
use tokio::net::TcpStream;

/// How a response breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Break {
    /// The connection closes mid-body.
    Cut,
    /// Nothing more is sent; the connection stays open.
    Stall,
    /// Either, drawn for each break.
    Either,
}

/// A resumable stream server's answers ([`Fault::Resumable`](super::Fault::Resumable)).
///
/// ```
/// use std::time::Duration;
/// use nika_retry_tests::fault::resumable::{Break, Resumable};
///
/// let answers = Resumable::new(20, 7).breaking(1, 50, Break::Cut).every(Duration::from_millis(1));
/// assert_eq!(Resumable::event(3, 0), "3.0;");
/// assert_eq!(answers.text(3).len(), (0..20).map(|i| Resumable::event(3, i).len()).sum::<usize>());
/// ```
#[derive(Clone, Debug)]
pub struct Resumable {
    /// Events in a whole answer.
    pub events: usize,
    /// The wait before each event.
    pub every: Duration,
    /// The break of a response, as a share of the whole answer past where
    /// it started, in percent: drawn in `low..=high`.
    pub between: (u32, u32),
    /// How many responses of each stream break (the first ones).
    pub breaks: u32,
    /// How they break.
    pub how: Break,
    seed: u64,
    /// Responses served per stream.
    served: Arc<Mutex<HashMap<u64, u32>>>,
}

impl PartialEq for Resumable {
    fn eq(&self, other: &Resumable) -> bool {
        Arc::ptr_eq(&self.served, &other.served)
    }
}

impl Resumable {
    /// Answers of `events` events, breaking the first response of each
    /// stream 1–50 % of the way through, cut or stalled; `seed` draws where.
    pub fn new(events: usize, seed: u64) -> Resumable {
        Resumable {
            events,
            every: Duration::ZERO,
            between: (1, 50),
            breaks: 1,
            how: Break::Either,
            seed,
            served: Arc::default(),
        }
    }

    /// Breaks `how`, `low`–`high` % of the way through.
    pub fn breaking(mut self, low: u32, high: u32, how: Break) -> Resumable {
        (self.between, self.how) = ((low, high.max(low)), how);
        self
    }

    /// The first `n` responses of each stream break.
    pub fn breaks(mut self, n: u32) -> Resumable {
        self.breaks = n;
        self
    }

    /// Waits `every` before each event.
    pub fn every(mut self, every: Duration) -> Resumable {
        self.every = every;
        self
    }

    /// Event `i` of stream `id`.
    pub fn event(id: u64, i: usize) -> String {
        format!("{id}.{i};")
    }

    /// The whole answer of stream `id`.
    pub fn text(&self, id: u64) -> String {
        (0..self.events).map(|i| Resumable::event(id, i)).collect()
    }

    /// How many responses stream `id` was served.
    pub fn served(&self, id: u64) -> u32 {
        self.served
            .lock()
            .expect("served")
            .get(&id)
            .copied()
            .unwrap_or(0)
    }

    /// Where a response of stream `id` starts: after `?starting_after=N`,
    /// or after the text a continuation carries. `Err(())`: a continuation
    /// that is not whole events of the answer.
    fn start(&self, id: u64, path: &str, body: &str) -> Result<usize, ()> {
        if path.starts_with("/continue/") {
            let mut at = 0;
            let mut from = 0;
            while at < body.len() {
                let event = Resumable::event(id, from);
                if from >= self.events || !body[at..].starts_with(&event) {
                    return Err(());
                }
                (at, from) = (at + event.len(), from + 1);
            }
            return Ok(from);
        }
        let after = path
            .split_once("starting_after=")
            .and_then(|(_, n)| n.split('&').next()?.parse::<usize>().ok());
        Ok(after.map_or(0, |n| n + 1))
    }

    /// The steps of response `nth` (0-based) of stream `id` from event
    /// `from`: the events, a break if this response breaks.
    fn steps(&self, id: u64, nth: u32, from: usize, cursor: bool) -> Vec<Step> {
        let mut rng = Rng::new(self.seed ^ id.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(nth));
        let to = if nth < self.breaks {
            let (low, high) = self.between;
            let share = low + (rng.next() % u64::from(high - low + 1)) as u32;
            // At least one event of its own before it breaks.
            let cut_at = from + (self.events * share as usize / 100).max(1);
            cut_at.min(self.events)
        } else {
            self.events
        };
        let mut steps = Vec::new();
        for i in from..to {
            if !self.every.is_zero() {
                steps.push(Step::Wait(self.every));
            }
            let text = Resumable::event(id, i);
            steps.push(if cursor {
                Step::Numbered(i, text)
            } else {
                Step::Event(text)
            });
        }
        if to < self.events {
            let stall = match self.how {
                Break::Cut => false,
                Break::Stall => true,
                Break::Either => rng.next() % 2 == 0,
            };
            steps.push(if stall { Step::Stall } else { Step::Cut });
        }
        steps
    }
}

/// The stream id in `/cursor/{id}` or `/continue/{id}`.
fn stream_id(path: &str) -> Option<u64> {
    let rest = path
        .strip_prefix("/cursor/")
        .or_else(|| path.strip_prefix("/continue/"))?;
    rest.split('?').next()?.parse().ok()
}

/// Answers one request of a resumable stream by playing its part of the
/// answer; `Err` with the status to answer instead: 404 for a path that
/// names no stream, 409 for a continuation that is not whole events of it.
pub(super) async fn answer(
    stream: &mut TcpStream,
    answers: &Resumable,
    path: &str,
    body: &str,
    on_event: impl FnMut(),
) -> Result<Ended, &'static str> {
    let id = stream_id(path).ok_or("404")?;
    let from = answers.start(id, path, body).map_err(|()| "409")?;
    let nth = {
        let mut served = answers.served.lock().expect("served");
        let n = served.entry(id).or_insert(0);
        *n += 1;
        *n - 1
    };
    let steps = answers.steps(id, nth, from, path.starts_with("/cursor/"));
    Ok(play(stream, &steps, on_event).await)
}

/// xorshift64*: enough to spread break points, reproducible from a seed.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_continuation_is_whole_events_of_the_answer() {
        let r = Resumable::new(5, 1);
        let so_far: String = (0..2).map(|i| Resumable::event(4, i)).collect();
        assert_eq!(r.start(4, "/continue/4", &so_far), Ok(2));
        assert_eq!(r.start(4, "/continue/4", ""), Ok(0));
        assert_eq!(
            r.start(4, "/continue/4", &so_far[..3]),
            Err(()),
            "half an event"
        );
        let twice = format!("{so_far}{}", Resumable::event(4, 1));
        assert_eq!(r.start(4, "/continue/4", &twice), Err(()), "one repeated");
        assert_eq!(r.start(4, "/cursor/4?starting_after=2", ""), Ok(3));
        assert_eq!(r.start(4, "/cursor/4", ""), Ok(0));
    }

    #[test]
    fn the_first_response_breaks_between_its_bounds_and_the_next_completes() {
        let r = Resumable::new(100, 9).breaking(1, 50, Break::Cut);
        for id in 0..200 {
            let first = r.steps(id, 0, 0, true);
            let events = first.len() - 1;
            assert!((1..=50).contains(&events), "{id}: {events}");
            assert_eq!(first.last(), Some(&Step::Cut));
            let rest = r.steps(id, 1, events, true);
            assert_eq!(rest.len(), 100 - events, "the rest, whole");
        }
    }
}
