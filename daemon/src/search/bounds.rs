//! What a search may spend and how it keeps to it: its memory bounds, its clock and
//! cancellation, and why it stopped.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Largest file a search reads whole (so it can count as a read); bigger files are searched
/// as streams and never recorded.
pub const SEARCH_WHOLE_MAX_BYTES: u64 = 16 << 20;

/// Most bytes a searcher buffers beyond its first 64 KiB: a line of a file searched as a
/// stream, or a whole file a multiline search reads (files up to [`SEARCH_WHOLE_MAX_BYTES`]).
pub(crate) const SEARCH_HEAP_BYTES: usize = SEARCH_WHOLE_MAX_BYTES as usize + (1 << 20);

/// What a searcher's line buffer starts with (grep-searcher's default), before
/// [`SEARCH_HEAP_BYTES`] more.
const LINE_BUFFER_START: u64 = 64 * 1024;

/// Most bytes of file contents one search holds at once: each of its two probing threads a
/// file read whole (at most [`SEARCH_WHOLE_MAX_BYTES`]) or a stream's line buffer, or, while it
/// shows a file's lines, that file whole and its line buffer. With the regex bound, what
/// `daemon/status` reports one search may hold.
pub const SEARCH_BUFFER_BYTES: u64 = 2 * (LINE_BUFFER_START + SEARCH_HEAP_BYTES as u64);

/// What a search may spend, and how it learns that its request was cancelled.
pub struct SearchLimits<'a> {
    /// Whether the request was cancelled (asked between files and between pieces of a file).
    pub cancelled: &'a (dyn Fn() -> bool + Sync),
    /// How long the search may run before it stops and answers what it found.
    pub timeout: Duration,
    /// Most memory its regular expression may use (see [`RegexLimits`]).
    pub regex_bytes: usize,
}

/// How one search's regex bound is shared out. A search runs its regex on at most two threads
/// (see `search::probe`), and the engine builds its program forward and reversed and gives each
/// thread a lazy DFA cache for each direction; so a quarter each way for the program and an
/// eighth each way and thread for the caches add up to the bound. The lazy DFA clears a full
/// cache and, when that happens too often, hands over to a slower engine that needs no more;
/// a pattern whose program does not fit is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegexLimits {
    /// Most bytes of the compiled program, each way (grep-regex's `size_limit`).
    pub program: usize,
    /// Most bytes of one lazy DFA cache (grep-regex's `dfa_size_limit`).
    pub dfa_cache: usize,
}

impl RegexLimits {
    /// The shares of `bytes`.
    pub fn of(bytes: usize) -> Self {
        Self { program: bytes / 4, dfa_cache: bytes / 8 }
    }
}

/// A search's clock and its cancellation.
pub struct Clock<'a> {
    cancelled: &'a (dyn Fn() -> bool + Sync),
    timeout: Duration,
    /// When it stops searching.
    deadline: Instant,
    /// When showing the lines of files it already found matching stops, past the deadline.
    grace: Instant,
    timed_out: AtomicBool,
}

impl<'a> Clock<'a> {
    /// The clock of a search within `limits`, started now.
    pub fn new(limits: &SearchLimits<'a>) -> Self {
        let now = Instant::now();
        let deadline = now.checked_add(limits.timeout).unwrap_or(now + Duration::from_secs(86_400));
        let grace = deadline.checked_add(limits.timeout / 4).unwrap_or(deadline);
        Self {
            cancelled: limits.cancelled,
            timeout: limits.timeout,
            deadline,
            grace,
            timed_out: AtomicBool::new(false),
        }
    }

    fn past(&self, when: Instant) -> bool {
        let past = Instant::now() >= when;
        if past {
            self.timed_out.store(true, Ordering::Relaxed);
        }
        past
    }

    /// Whether the search must stop now: cancelled, or out of time.
    pub fn stop(&self) -> bool {
        (self.cancelled)() || self.past(self.deadline)
    }

    /// Whether showing the lines of a file found matching must stop: cancelled, or past the
    /// deadline's grace.
    pub fn stop_showing(&self) -> bool {
        (self.cancelled)() || self.past(self.grace)
    }

    /// Whether its request was cancelled.
    pub fn cancelled(&self) -> bool {
        (self.cancelled)()
    }

    /// Why the search stopped, if it did: its request cancelled, else its time out.
    pub fn stopped(&self) -> Option<Stopped> {
        if self.cancelled() {
            Some(Stopped::Cancelled)
        } else if self.timed_out.load(Ordering::Relaxed) {
            Some(Stopped::TimedOut)
        } else {
            None
        }
    }

    /// The time limit as the model reads it.
    pub fn limit_text(&self) -> String {
        format!("{} s", self.timeout.as_secs_f64())
    }
}

/// Why a search stopped before it looked at every file it would.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// Its request was cancelled (or its client left): it answers nothing.
    Cancelled,
    /// Its time ran out: it answers what it found, and says how much it searched.
    TimedOut,
    /// Its answer is full (`head_limit`, or its output budget): what it shows is all it shows.
    Bounded,
}
