//! Owners: who inside a session observed what. Sub-agents multiplexed over one connection name
//! themselves with `owner` on `tools/call` and `file/*`; each owner has its own observations
//! (so one owner's read never authorizes another's edit) and its own dedup record of what the
//! `read` tool delivered to it. No `owner` is the session's default owner.
//!
//! Bounded: at most `max_owners` named owners per session (an owner name is 1 to
//! [`MAX_OWNER_BYTES`] bytes), each with observations bounded as a session's are and a dedup
//! record of at most [`MAX_DELIVERED`] entries; and in bytes: what an owner's records hold is
//! counted in its account, charged to its session's ledger (see [`crate::context::ledger`]),
//! and the largest owners give back their least recently used observations when the session
//! or the daemon is over its byte cap.
//!
//! Each owner reports its observations to the watcher through a `Relay` that can be switched:
//! a parked owner (its session ended, kept for a resume) reports to nobody, and its watcher
//! registrations are dropped; a resumed one is attached to its new session's watcher sink.
//! The owners know the watcher only as an [`ObservationHub`] (the session module makes the
//! watcher one), so they name nothing of it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use filectx_protocol::MAX_OWNER_BYTES;

use crate::context::ledger::{Account, DELIVERED_ENTRY_BYTES, Holder, Ledger};
use crate::context::{ObservationSink, Observations};
use crate::stats::Stats;

/// Most entries in one owner's dedup record; past it the least recently delivered are
/// forgotten (their next read sends the text, which is never wrong).
pub const MAX_DELIVERED: usize = 512;

/// Default of [`OwnerLimits::max_owners`].
pub const DEFAULT_MAX_OWNERS: usize = 64;

/// Why an `owner` was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OwnerError {
    /// The name is empty.
    #[error("owner must not be empty; leave it out to use the session's default owner")]
    Empty,
    /// The name is over [`MAX_OWNER_BYTES`].
    #[error("owner is {len} bytes long; an owner name may be at most {MAX_OWNER_BYTES} bytes")]
    TooLong {
        /// Its length in bytes.
        len: usize,
    },
    /// The session already has its most named owners.
    #[error(
        "this session already has {max} owners (the daemon's max_owners); use one of them, or open \
         another session"
    )]
    TooMany {
        /// The limit.
        max: usize,
    },
}

/// Checks an owner name (without creating anything).
pub fn check_name(name: &str) -> Result<(), OwnerError> {
    if name.is_empty() {
        return Err(OwnerError::Empty);
    }
    if name.len() > MAX_OWNER_BYTES {
        return Err(OwnerError::TooLong { len: name.len() });
    }
    Ok(())
}

/// The bounds of one session's owners.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnerLimits {
    /// Most named owners (the default owner not counted).
    pub max_owners: usize,
    /// Most files one owner remembers having observed.
    pub max_observed: usize,
}

/// What one owner was delivered by the `read` tool: digests of (path, version, the exact text),
/// bounded; a hit is taken out, so the next identical read sends the text again.
#[derive(Debug)]
pub struct Delivered {
    max: usize,
    inner: Mutex<DeliveredMap>,
    /// Where its bytes are counted ([`DELIVERED_ENTRY_BYTES`] an entry), if anywhere.
    account: Option<Arc<Account>>,
}

#[derive(Debug, Default)]
struct DeliveredMap {
    /// Digest → last use.
    entries: HashMap<u128, u64>,
    tick: u64,
}

impl Delivered {
    /// An empty record of at most `max` entries.
    pub fn new(max: usize) -> Self {
        Self { max: max.max(1), inner: Mutex::default(), account: None }
    }

    /// An empty record of at most `max` entries, counted in `account`.
    fn with_account(max: usize, account: Arc<Account>) -> Self {
        Self { account: Some(account), ..Self::new(max) }
    }

    /// Counts a change of `before` entries to `after`.
    fn counted(&self, before: usize, after: usize) {
        if let Some(account) = &self.account {
            match after.cmp(&before) {
                std::cmp::Ordering::Greater => account.add((after - before) * DELIVERED_ENTRY_BYTES),
                std::cmp::Ordering::Less => account.sub((before - after) * DELIVERED_ENTRY_BYTES),
                std::cmp::Ordering::Equal => {}
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, DeliveredMap> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether `digest` was delivered (and not yet answered short); forgets it if so, so that
    /// asking again gets the text.
    pub fn take(&self, digest: u128) -> bool {
        let taken = self.lock().entries.remove(&digest).is_some();
        if taken {
            self.counted(1, 0);
        }
        taken
    }

    /// Records that `digest` was delivered.
    pub fn record(&self, digest: u128) {
        let (before, after) = {
            let mut map = self.lock();
            let before = map.entries.len();
            map.tick += 1;
            let tick = map.tick;
            map.entries.insert(digest, tick);
            if map.entries.len() > self.max {
                let count = crate::lru::batch(map.entries.len()).min(map.entries.len() - 1);
                for old in crate::lru::least_recent(&map.entries, count, |used| *used) {
                    map.entries.remove(&old);
                }
            }
            (before, map.entries.len())
        };
        self.counted(before, after);
    }

    /// Forgets everything (the client's context was reset); returns the bytes freed.
    pub fn clear(&self) -> usize {
        let before = {
            let mut map = self.lock();
            std::mem::take(&mut map.entries).len()
        };
        self.counted(before, 0);
        before * DELIVERED_ENTRY_BYTES
    }

    /// Entries recorded.
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    /// Whether nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// An observation sink that forwards to a sink that can be switched (or to none).
#[derive(Default)]
struct Relay {
    target: Mutex<Option<Arc<dyn ObservationSink>>>,
}

impl Relay {
    fn target(&self) -> Option<Arc<dyn ObservationSink>> {
        self.target.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    fn set(&self, target: Option<Arc<dyn ObservationSink>>) {
        *self.target.lock().unwrap_or_else(PoisonError::into_inner) = target;
    }
}

impl ObservationSink for Relay {
    fn observed(&self, path: &Path, links: u64) {
        if let Some(target) = self.target() {
            target.observed(path, links);
        }
    }

    fn forgotten(&self, path: &Path) {
        if let Some(target) = self.target() {
            target.forgotten(path);
        }
    }
}

/// One owner of a session: its observations and its dedup record, counted in one account.
pub struct Owner {
    name: Option<Arc<str>>,
    observations: Observations,
    delivered: Delivered,
    relay: Arc<Relay>,
    account: Arc<Account>,
}

impl std::fmt::Debug for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Owner")
            .field("name", &self.name)
            .field("observations", &self.observations)
            .field("delivered", &self.delivered.len())
            .finish()
    }
}

impl Owner {
    fn new(
        name: Option<Arc<str>>,
        max_observed: usize,
        sink: Option<Arc<dyn ObservationSink>>,
        ledger: Option<Arc<Ledger>>,
    ) -> Arc<Self> {
        let relay = Arc::new(Relay { target: Mutex::new(sink) });
        let account = Account::new(ledger.clone());
        let owner = Arc::new(Self {
            name,
            observations: Observations::with_account(max_observed, Some(relay.clone()), account.clone()),
            delivered: Delivered::with_account(MAX_DELIVERED, account.clone()),
            relay,
            account,
        });
        if let Some(ledger) = ledger {
            ledger.join(owner.holder());
        }
        owner
    }

    /// This owner as one of its session's holders (see [`Ledger::join`]).
    fn holder(self: &Arc<Self>) -> std::sync::Weak<dyn Holder> {
        let holder: Arc<dyn Holder> = self.clone();
        Arc::downgrade(&holder)
    }

    /// The owner's name; `None` for the session's default owner.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// What this owner has observed.
    pub fn observations(&self) -> &Observations {
        &self.observations
    }

    /// What the `read` tool delivered to this owner.
    pub fn delivered(&self) -> &Delivered {
        &self.delivered
    }

    /// Parks the owner: its watcher registrations are dropped and it reports to nobody; its
    /// dedup record is forgotten (a resumed session starts sending texts afresh); its bytes are
    /// no longer charged to a session (the park store counts them).
    fn detach(&self) {
        if let Some(target) = self.relay.target() {
            for (path, _) in self.observations.entries() {
                target.forgotten(&path);
            }
        }
        self.relay.set(None);
        self.delivered.clear();
        self.account.move_to(None);
    }

    /// Attaches a parked owner to `sink` and `ledger` and tells the sink about every recorded
    /// file; returns them.
    fn attach(
        self: &Arc<Self>,
        sink: Option<Arc<dyn ObservationSink>>,
        ledger: Option<&Arc<Ledger>>,
    ) -> Vec<PathBuf> {
        self.account.move_to(ledger.cloned());
        if let Some(ledger) = ledger {
            ledger.join(self.holder());
        }
        self.relay.set(sink.clone());
        let entries = self.observations.entries();
        if let Some(sink) = sink {
            for (path, links) in &entries {
                sink.observed(path, *links);
            }
        }
        entries.into_iter().map(|(path, _)| path).collect()
    }

    /// About how many bytes the owner holds.
    pub fn approx_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.name.as_deref().map_or(0, str::len)
            + self.observations.approx_bytes()
            + self.delivered.len() * DELIVERED_ENTRY_BYTES
    }
}

impl Holder for Owner {
    fn held(&self) -> usize {
        self.account.bytes()
    }

    /// Observations first (the least recently used; an evicted one only means a read before
    /// the next write), then, when only its most recent observation is left, the dedup record.
    fn give_back(&self, bytes: usize) -> usize {
        let mut freed = self.observations.evict(bytes);
        if freed < bytes {
            freed += self.delivered.clear();
        }
        freed
    }
}

/// Where a session's owners report what they observe: one [`ObservationSink`] per owner, and
/// the word that the session ended (the watcher, when there is one).
pub trait ObservationHub: Send + Sync {
    /// The sink of owner `owner` (`None`: the default owner) of session `session`.
    fn sink_for(self: Arc<Self>, session: &str, owner: Option<&str>) -> Arc<dyn ObservationSink>;

    /// Forgets session `session`, which ended (its owners were dropped or parked first).
    fn session_ended(&self, session: &str);
}

/// A session's owners: the default owner and at most `max_owners` named ones.
pub struct Owners {
    session: String,
    limits: OwnerLimits,
    hub: Option<Arc<dyn ObservationHub>>,
    stats: Arc<Stats>,
    /// The session's byte ledger, when it is bounded in bytes.
    ledger: Option<Arc<Ledger>>,
    /// Made on first use, or taken over from an ended session at `initialize`.
    default: OnceLock<Arc<Owner>>,
    named: Mutex<HashMap<Arc<str>, Arc<Owner>>>,
}

impl std::fmt::Debug for Owners {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Owners").field("session", &self.session).field("named", &self.named_count()).finish()
    }
}

impl Owners {
    /// The owners of session `session`, reporting observations to `hub` (when there is one).
    pub fn new(
        session: String,
        limits: OwnerLimits,
        hub: Option<Arc<dyn ObservationHub>>,
        stats: Arc<Stats>,
    ) -> Self {
        Self { session, limits, hub, stats, ledger: None, default: OnceLock::new(), named: Mutex::default() }
    }

    /// The same owners, their records counted in `ledger` (the session's byte cap).
    pub fn bounded(mut self, ledger: Arc<Ledger>) -> Self {
        self.ledger = Some(ledger);
        self
    }

    fn sink(&self, name: Option<&str>) -> Option<Arc<dyn ObservationSink>> {
        self.hub.as_ref().map(|hub| Arc::clone(hub).sink_for(&self.session, name))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, Arc<Owner>>> {
        self.named.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The session's default owner.
    pub fn default_owner(&self) -> &Arc<Owner> {
        self.default
            .get_or_init(|| Owner::new(None, self.limits.max_observed, self.sink(None), self.ledger.clone()))
    }

    /// The owner `name` (the default owner for `None`), made on first use.
    ///
    /// # Errors
    /// A name that is empty or too long, or a new name past `max_owners`.
    pub fn get(&self, name: Option<&str>) -> Result<Arc<Owner>, OwnerError> {
        let Some(name) = name else { return Ok(self.default_owner().clone()) };
        check_name(name)?;
        let mut named = self.lock();
        if let Some(owner) = named.get(name) {
            return Ok(owner.clone());
        }
        if named.len() >= self.limits.max_owners {
            return Err(OwnerError::TooMany { max: self.limits.max_owners });
        }
        let key: Arc<str> = Arc::from(name);
        let sink = self.sink(Some(name));
        let owner = Owner::new(Some(key.clone()), self.limits.max_observed, sink, self.ledger.clone());
        named.insert(key, owner.clone());
        self.stats.owners.fetch_add(1, Ordering::Relaxed);
        Ok(owner)
    }

    /// The owner `name` if it exists (never makes one).
    pub fn find(&self, name: Option<&str>) -> Option<Arc<Owner>> {
        match name {
            None => self.default.get().cloned(),
            Some(name) => self.lock().get(name).cloned(),
        }
    }

    /// Every owner that exists.
    pub fn all(&self) -> Vec<Arc<Owner>> {
        let mut all: Vec<Arc<Owner>> = self.lock().values().cloned().collect();
        all.extend(self.default.get().cloned());
        all
    }

    /// Named owners.
    pub fn named_count(&self) -> usize {
        self.lock().len()
    }

    /// Takes every owner out, parked (no watcher registrations, no sink), for keeping them
    /// after the session ended.
    pub(crate) fn park_all(&mut self) -> Vec<Arc<Owner>> {
        let named: Vec<Arc<Owner>> = self.lock().drain().map(|(_, owner)| owner).collect();
        self.stats.owners.fetch_sub(named.len() as u64, Ordering::Relaxed);
        let mut all = named;
        all.extend(self.default.take());
        for owner in &all {
            owner.detach();
        }
        all
    }

    /// Takes over the parked owners of an ended session (before anything used this session's
    /// owners): attaches them to this session's watcher sinks. Returns the files they observed,
    /// to be checked for changes made while they were parked.
    pub(crate) fn adopt(&self, parked: Vec<Arc<Owner>>) -> Vec<PathBuf> {
        let mut paths = Vec::new();
        for owner in parked {
            match owner.name.clone() {
                None => {
                    paths.extend(owner.attach(self.sink(None), self.ledger.as_ref()));
                    if let Err(owner) = self.default.set(owner) {
                        // Cannot happen (adopted before any use); the parked record is dropped.
                        tracing::warn!(session = %self.session, "default owner in use; resumed observations dropped");
                        owner.detach();
                    }
                }
                Some(name) => {
                    paths.extend(owner.attach(self.sink(Some(&name)), self.ledger.as_ref()));
                    if self.lock().insert(name, owner).is_none() {
                        self.stats.owners.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }
        // What was parked may be more than this session's cap.
        if let Some(ledger) = &self.ledger {
            ledger.settle();
        }
        paths
    }
}

impl Drop for Owners {
    fn drop(&mut self) {
        let named: Vec<Arc<Owner>> =
            self.named.get_mut().unwrap_or_else(PoisonError::into_inner).drain().map(|(_, o)| o).collect();
        self.stats.owners.fetch_sub(named.len() as u64, Ordering::Relaxed);
        // The owners go first (their paths leave the watcher), then the session: the watcher
        // gives back its tables' room once they are empty.
        drop(named);
        drop(self.default.take());
        if let Some(hub) = &self.hub {
            hub.session_ended(&self.session);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::Version;

    fn owners(max_owners: usize) -> Owners {
        Owners::new("t".into(), OwnerLimits { max_owners, max_observed: 16 }, None, Arc::new(Stats::new()))
    }

    #[test]
    fn names_are_checked_and_counted() {
        let o = owners(2);
        assert_eq!(o.get(Some("")).unwrap_err(), OwnerError::Empty);
        let long = "x".repeat(MAX_OWNER_BYTES + 1);
        assert_eq!(o.get(Some(&long)).unwrap_err(), OwnerError::TooLong { len: MAX_OWNER_BYTES + 1 });
        assert!(o.get(Some(&"y".repeat(MAX_OWNER_BYTES))).is_ok());
        assert!(o.get(Some("a")).is_ok());
        assert_eq!(o.get(Some("b")).unwrap_err(), OwnerError::TooMany { max: 2 });
        assert!(o.get(Some("a")).is_ok(), "an existing owner is always found");
        assert!(o.get(None).is_ok(), "the default owner does not count");
        assert_eq!(Stats::get(&o.stats.owners), 2);
        drop(o.find(Some("a")));
    }

    #[test]
    fn owners_keep_apart_and_park_whole() {
        let mut o = owners(4);
        let v = Version::of(b"x");
        o.get(Some("a")).unwrap().observations().record(Path::new("/f"), v, 1);
        assert_eq!(o.get(None).unwrap().observations().get(Path::new("/f")), None);
        o.get(None).unwrap().delivered().record(7);
        let parked = o.park_all();
        assert_eq!(parked.len(), 2);
        assert!(parked.iter().all(|owner| owner.delivered().is_empty()), "dedup forgotten when parked");
        let fresh = owners(4);
        let paths = fresh.adopt(parked);
        assert_eq!(paths, vec![PathBuf::from("/f")]);
        assert_eq!(fresh.find(Some("a")).unwrap().observations().get(Path::new("/f")), Some(v));
        assert!(fresh.find(None).is_some());
    }

    #[test]
    fn a_session_bounded_in_bytes_evicts_its_largest_owner_and_parks_uncounted() {
        use crate::context::ledger::{Ledgers, observation_bytes};
        let daemon = Ledgers::new(1 << 30, 64 * 1024);
        let mut o = Owners::new(
            "t".into(),
            OwnerLimits { max_owners: 4, max_observed: 10_000 },
            None,
            Arc::new(Stats::new()),
        )
        .bounded(daemon.session());
        let v = Version::of(b"x");
        let path = |n: usize| PathBuf::from(format!("/{}/f{n}", "d".repeat(1000)));
        let small = o.get(Some("small")).unwrap();
        small.observations().record(&path(0), v, 1);
        small.delivered().record(1);
        let big = o.get(Some("big")).unwrap();
        for n in 0..200 {
            big.observations().record(&path(n), v, 1);
            assert_eq!(big.observations().get(&path(n)), Some(v), "the record just made stays");
        }
        assert!(daemon.used() <= 64 * 1024, "{}", daemon.used());
        assert!(big.observations().len() < 200 && big.observations().len() > 10);
        assert_eq!(small.observations().get(&path(0)), Some(v), "the small owner kept its record");
        assert_eq!(small.delivered().len(), 1);
        assert!(daemon.evicted() > 0);
        let held = small.observations().bytes() + big.observations().bytes() + DELIVERED_ENTRY_BYTES;
        assert_eq!(daemon.used(), held);
        assert_eq!(small.observations().bytes(), observation_bytes(&path(0)));
        // Parked owners are counted by the park store, not here; adopted ones count again.
        drop((small, big));
        let parked = o.park_all();
        assert_eq!(daemon.used(), 0);
        let fresh = Owners::new(
            "u".into(),
            OwnerLimits { max_owners: 4, max_observed: 10_000 },
            None,
            Arc::new(Stats::new()),
        )
        .bounded(daemon.session());
        fresh.adopt(parked);
        assert!(daemon.used() > 0 && daemon.used() <= 64 * 1024);
        drop(fresh);
        assert_eq!(daemon.used(), 0, "an ended session gives everything back");
    }

    #[test]
    fn delivered_is_bounded_and_a_hit_is_taken_out() {
        let d = Delivered::new(4);
        d.record(1);
        assert!(d.take(1));
        assert!(!d.take(1), "the next identical ask gets the text");
        for n in 0..10 {
            d.record(n);
        }
        assert!(d.len() <= 4);
        assert!(d.take(9), "the most recent survive");
        d.clear();
        assert!(d.is_empty());
    }
}
