//! Daemon-wide counters behind `daemon/status`. Lock-free: every connection bumps them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Counters shared by the accept loop, every connection and the status method.
#[derive(Debug)]
pub struct Stats {
    started: Instant,
    /// Connections open now.
    pub sessions: AtomicU64,
    /// Connections refused (over the cap, or a peer of another uid).
    pub refused_connections: AtomicU64,
    /// Requests served (batch entries count one each; notifications do not count).
    pub requests: AtomicU64,
    /// Server→client notifications dropped because the client's queue was full.
    pub notifications_dropped: AtomicU64,
    /// Uptime (ms) when a session last ended, for the idle exit.
    pub last_session_end_ms: AtomicU64,
    /// Named owners of the sessions open now.
    pub owners: AtomicU64,
    /// Responses from clients that matched no request of the daemon (dropped).
    pub unmatched_responses: AtomicU64,
}

impl Stats {
    /// Fresh counters; uptime starts now.
    pub fn new() -> Self {
        Self {
            started: Instant::now(),
            sessions: AtomicU64::new(0),
            refused_connections: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            notifications_dropped: AtomicU64::new(0),
            last_session_end_ms: AtomicU64::new(0),
            owners: AtomicU64::new(0),
            unmatched_responses: AtomicU64::new(0),
        }
    }

    /// Milliseconds since [`Stats::new`].
    pub fn uptime_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Adds one to a counter.
    pub fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Reads a counter.
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

impl Default for Stats {
    fn default() -> Self {
        Self::new()
    }
}
