//! Resuming a session after a reconnect: unguessable resume tokens, and the store of ended
//! resumable sessions (their owners, parked: observations kept, no watcher registrations),
//! bounded in count and bytes, oldest dropped first, each kept for the grace period.
//!
//! Safe by construction: a resumed observation is only a recorded version; every write and edit
//! still checks it against the file's current version, so a file changed while the session was
//! away is refused as stale.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::session::owners::Owner;

/// Default of [`crate::Config::resume_grace`]: 10 minutes.
pub const DEFAULT_RESUME_GRACE_SECS: u64 = 600;
/// Default of [`crate::Config::max_parked_sessions`].
pub const DEFAULT_MAX_PARKED_SESSIONS: u64 = 64;
/// Default of [`crate::Config::max_parked_bytes`]: 64 MiB.
pub const DEFAULT_MAX_PARKED_BYTES: u64 = 64 * 1024 * 1024;

/// How long a `resume` waits for the session of its token to end when that session is still
/// being torn down (a client that reconnects at once may get here before the daemon has
/// noticed that the old connection closed).
pub const RESUME_WAIT: Duration = Duration::from_secs(2);

/// Random bytes in a token (256 bits).
const TOKEN_BYTES: usize = 32;

/// What the store keys a parked session by: a hash of its token (the token itself is never
/// kept, and lookups do not compare secrets byte by byte).
pub type Digest = [u8; 32];

/// The digest of a token.
pub fn digest(token: &str) -> Digest {
    *blake3::hash(token.as_bytes()).as_bytes()
}

/// A new token (lowercase hex of 256 random bits from `getrandom(2)`) and its digest.
///
/// # Errors
/// When the kernel gives no randomness (then no token is made: a guessable one would let any
/// process of the user take the session over, which is the same user, but still).
pub fn new_token() -> std::io::Result<(String, Digest)> {
    let token = crate::random::hex(TOKEN_BYTES)?;
    let digest = digest(&token);
    Ok((token, digest))
}

/// The store's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParkLimits {
    /// How long an ended session is kept.
    pub grace: Duration,
    /// Most ended sessions kept.
    pub max_sessions: usize,
    /// Most bytes they may hold (estimated).
    pub max_bytes: usize,
}

/// Ended resumable sessions, waiting for a `resume`.
#[derive(Debug)]
pub struct ParkStore {
    limits: ParkLimits,
    inner: Mutex<Parked>,
    /// Woken whenever a session is parked.
    parked: tokio::sync::Notify,
}

#[derive(Debug, Default)]
struct Parked {
    /// Oldest first.
    entries: VecDeque<Entry>,
    bytes: usize,
    /// Tokens of resumable sessions still open (bounded by the connection cap).
    live: HashSet<Digest>,
}

#[derive(Debug)]
struct Entry {
    digest: Digest,
    at: Instant,
    bytes: usize,
    owners: Vec<Arc<Owner>>,
}

impl Parked {
    /// Takes out what is past the grace period.
    fn expire(&mut self, grace: Duration, out: &mut Vec<Entry>) {
        while self.entries.front().is_some_and(|e| e.at.elapsed() >= grace) {
            if let Some(entry) = self.entries.pop_front() {
                self.bytes -= entry.bytes;
                out.push(entry);
            }
        }
    }
}

impl ParkStore {
    /// An empty store.
    pub fn new(limits: ParkLimits) -> Arc<Self> {
        Arc::new(Self { limits, inner: Mutex::default(), parked: tokio::sync::Notify::new() })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Parked> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Notes that the open session of `digest` is resumable (a `resume` of it waits for it to
    /// end, briefly).
    pub fn expect(&self, digest: Digest) {
        self.lock().live.insert(digest);
    }

    /// Keeps an ended session's parked owners under `digest`; drops the oldest kept sessions
    /// while the store is over its bounds (a session too big for the store alone is not kept).
    pub fn park(&self, digest: Digest, owners: Vec<Arc<Owner>>) {
        let bytes = owners.iter().map(|o| o.approx_bytes()).sum::<usize>() + std::mem::size_of::<Entry>();
        let mut dropped = Vec::new();
        {
            let mut parked = self.lock();
            parked.live.remove(&digest);
            parked.expire(self.limits.grace, &mut dropped);
            if bytes > self.limits.max_bytes || self.limits.max_sessions == 0 {
                drop(parked);
                tracing::info!(
                    bytes,
                    limit = self.limits.max_bytes,
                    "an ended session is too big to keep for a resume"
                );
                self.parked.notify_waiters();
                return;
            }
            parked.entries.push_back(Entry { digest, at: Instant::now(), bytes, owners });
            parked.bytes += bytes;
            while parked.entries.len() > self.limits.max_sessions || parked.bytes > self.limits.max_bytes {
                let Some(oldest) = parked.entries.pop_front() else { break };
                parked.bytes -= oldest.bytes;
                dropped.push(oldest);
            }
        }
        self.parked.notify_waiters();
        if !dropped.is_empty() {
            tracing::debug!(count = dropped.len(), "ended sessions no longer kept for a resume");
        }
        // Dropped outside the lock.
        drop(dropped);
    }

    /// Takes the session parked under `token` out (a token works once), if it is there and
    /// within the grace period; when its session is still open, waits up to `wait` for it to
    /// end.
    pub async fn take(&self, token: &str, wait: Duration) -> Option<Vec<Arc<Owner>>> {
        let digest = digest(token);
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let notified = self.parked.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            match self.try_take_digest(&digest) {
                Ok(found) => return Some(found),
                Err(false) => return None,
                Err(true) => {}
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.try_take_digest(&digest).ok();
            }
        }
    }

    /// Takes the session parked under `token` out, without waiting.
    pub fn try_take(&self, token: &str) -> Option<Vec<Arc<Owner>>> {
        self.try_take_digest(&digest(token)).ok()
    }

    /// The parked owners under `digest`, or whether its session is still open.
    fn try_take_digest(&self, digest: &Digest) -> Result<Vec<Arc<Owner>>, bool> {
        let mut dropped = Vec::new();
        let found = {
            let mut parked = self.lock();
            parked.expire(self.limits.grace, &mut dropped);
            match parked.entries.iter().position(|e| e.digest == *digest) {
                Some(at) => match parked.entries.remove(at) {
                    Some(entry) => {
                        parked.bytes -= entry.bytes;
                        Ok(entry.owners)
                    }
                    None => Err(false),
                },
                None => Err(parked.live.contains(digest)),
            }
        };
        drop(dropped);
        found
    }

    /// Sessions kept and their estimated bytes (after dropping the expired).
    pub fn usage(&self) -> (usize, usize) {
        let mut dropped = Vec::new();
        let usage = {
            let mut parked = self.lock();
            parked.expire(self.limits.grace, &mut dropped);
            (parked.entries.len(), parked.bytes)
        };
        drop(dropped);
        usage
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::owners::{OwnerLimits, Owners};
    use crate::stats::Stats;

    fn parked(files: usize) -> Vec<Arc<Owner>> {
        let mut owners = Owners::new(
            "t".into(),
            OwnerLimits { max_owners: 4, max_observed: 100 },
            None,
            Arc::new(Stats::new()),
        );
        let v = crate::context::Version::of(b"x");
        for n in 0..files {
            owners.default_owner().observations().record(std::path::Path::new(&format!("/f{n}")), v, 1);
        }
        owners.park_all()
    }

    #[test]
    fn tokens_are_long_hex_and_differ() {
        let (a, da) = new_token().unwrap();
        let (b, _) = new_token().unwrap();
        assert_eq!(a.len(), 64);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
        assert_eq!(digest(&a), da);
    }

    #[test]
    fn a_token_works_once_and_the_store_is_bounded() {
        let store = ParkStore::new(ParkLimits {
            grace: Duration::from_secs(60),
            max_sessions: 2,
            max_bytes: 1 << 20,
        });
        let (a, da) = new_token().unwrap();
        store.park(da, parked(1));
        assert!(store.try_take("nope").is_none());
        assert!(store.try_take(&a).is_some());
        assert!(store.try_take(&a).is_none(), "single use");
        let tokens: Vec<(String, Digest)> = (0..3).map(|_| new_token().unwrap()).collect();
        for (_, d) in &tokens {
            store.park(*d, parked(1));
        }
        assert_eq!(store.usage().0, 2);
        assert!(store.try_take(&tokens[0].0).is_none(), "the oldest went first");
        assert!(store.try_take(&tokens[2].0).is_some());
    }

    #[test]
    fn bytes_and_grace_bound_it_too() {
        let one = parked(10).iter().map(|o| o.approx_bytes()).sum::<usize>() + std::mem::size_of::<Entry>();
        let store = ParkStore::new(ParkLimits {
            grace: Duration::from_secs(60),
            max_sessions: 100,
            max_bytes: one * 2,
        });
        for _ in 0..5 {
            store.park(new_token().unwrap().1, parked(10));
        }
        let (count, bytes) = store.usage();
        assert!(count <= 2 && bytes <= one * 2, "{count} {bytes}");
        store.park(new_token().unwrap().1, parked(1000));
        assert!(store.usage().1 <= one * 2, "a session too big is not kept");
        let brief =
            ParkStore::new(ParkLimits { grace: Duration::ZERO, max_sessions: 100, max_bytes: 1 << 20 });
        let (t, d) = new_token().unwrap();
        brief.park(d, parked(1));
        assert!(brief.try_take(&t).is_none(), "expired");
        assert_eq!(brief.usage(), (0, 0));
    }
}
