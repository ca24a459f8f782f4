//! Byte bounds on what sessions remember. Each owner's records (its observations and its dedup
//! record) are counted in bytes in an [`Account`], charged to its session's [`Ledger`], which is
//! charged to the daemon's [`Ledgers`]. When a record takes a session past its cap, or the daemon
//! past its own, the largest holders give back their least recently used records until there
//! is room again (and a margin, so that the next records evict nothing): the session's own
//! holders at the session's cap, the largest session's at the daemon's. Evicting is safe: an
//! observation forgotten only means that the file must be read again before it is written.
//! What an ended session kept for a resume is counted by the park store instead (its accounts
//! are detached), and counted here again once it is resumed.

use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

/// Default of the daemon's `max_session_observed_bytes`: 32 MiB per session.
pub const DEFAULT_MAX_SESSION_OBSERVED_BYTES: u64 = 32 * 1024 * 1024;
/// Default of the daemon's `max_observed_bytes`: 256 MiB over all sessions.
pub const DEFAULT_MAX_OBSERVED_BYTES: u64 = 256 * 1024 * 1024;

/// What one observation costs besides its path's bytes: the record's table slot (path handle,
/// version, use counter, links) and the watcher's registration of it (its table slot and the
/// observer's entry). Measured: see `observation_bytes`.
const OBSERVATION_OVERHEAD: usize = 384;

/// What one entry of a dedup record costs (a 16-byte digest and its use counter in a table).
pub const DELIVERED_ENTRY_BYTES: usize = 48;

/// A session's end that held at least this much wakes the daemon to give memory back at once.
const BIG_SESSION_BYTES: usize = 1024 * 1024;

/// What an observation of `path` costs, in bytes: the path twice (the owner's record holds it
/// as its key, and the watcher holds a copy to watch it) plus the tables' slots.
pub fn observation_bytes(path: &Path) -> usize {
    2 * path.as_os_str().len() + OBSERVATION_OVERHEAD
}

/// Something whose records are counted against a session's cap and that can give some back:
/// one owner of a session.
pub trait Holder: Send + Sync {
    /// Bytes it holds now.
    fn held(&self) -> usize;
    /// Forgets about `bytes` of its least recently used records, if it has that many (it
    /// always keeps its most recent observation, so the read that just recorded it still
    /// authorizes the edit that follows); returns the bytes freed.
    fn give_back(&self, bytes: usize) -> usize;
}

/// The daemon's ledger: the bytes every session's records hold, against the daemon's cap.
pub struct Ledgers {
    used: AtomicUsize,
    cap: usize,
    session_cap: usize,
    /// Every live session's ledger (dead ones are pruned as they are found).
    sessions: Mutex<Vec<Weak<Ledger>>>,
    /// One reclaim at a time, daemon-wide (two would evict twice for one excess).
    reclaiming: Mutex<()>,
    /// Observations forgotten to stay within a cap, since the start.
    evicted: AtomicU64,
    /// Woken when a session that held much ended (its memory can go back to the system).
    ended: tokio::sync::Notify,
}

impl std::fmt::Debug for Ledgers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ledgers").field("used", &self.used()).field("cap", &self.cap).finish()
    }
}

impl Ledgers {
    /// A daemon ledger of at most `cap` bytes, with sessions of at most `session_cap` each.
    pub fn new(cap: usize, session_cap: usize) -> Arc<Self> {
        Arc::new(Self {
            used: AtomicUsize::new(0),
            cap,
            session_cap,
            sessions: Mutex::default(),
            reclaiming: Mutex::new(()),
            evicted: AtomicU64::new(0),
            ended: tokio::sync::Notify::new(),
        })
    }

    /// A new session's ledger.
    pub fn session(self: &Arc<Self>) -> Arc<Ledger> {
        let ledger = Arc::new(Ledger {
            used: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            cap: self.session_cap,
            daemon: self.clone(),
            holders: Mutex::default(),
        });
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        sessions.retain(|s| s.strong_count() > 0);
        sessions.push(Arc::downgrade(&ledger));
        ledger
    }

    /// Bytes held over all sessions.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// The daemon's cap.
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// Each session's cap.
    pub fn session_cap(&self) -> usize {
        self.session_cap
    }

    /// Observations forgotten to stay within a cap, since the start.
    pub fn evicted(&self) -> u64 {
        self.evicted.load(Ordering::Relaxed)
    }

    /// Waits until a session that held at least a MiB has ended.
    pub async fn big_session_ended(&self) {
        self.ended.notified().await;
    }

    /// The live session holding the most.
    fn largest(&self) -> Option<Arc<Ledger>> {
        let sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        sessions.iter().filter_map(Weak::upgrade).max_by_key(|s| s.used())
    }
}

/// One session's ledger: the bytes its owners' records hold, against the session's cap.
pub struct Ledger {
    used: AtomicUsize,
    /// The most it ever held (to tell whether its end freed much).
    peak: AtomicUsize,
    cap: usize,
    daemon: Arc<Ledgers>,
    holders: Mutex<Vec<Weak<dyn Holder>>>,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ledger").field("used", &self.used()).field("cap", &self.cap).finish()
    }
}

impl Ledger {
    /// Bytes the session's records hold.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// Adds a holder whose records may be evicted to make room.
    pub fn join(&self, holder: Weak<dyn Holder>) {
        let mut holders = self.holders.lock().unwrap_or_else(PoisonError::into_inner);
        holders.retain(|h| h.strong_count() > 0);
        holders.push(holder);
    }

    fn charge(&self, bytes: usize) {
        let now = self.used.fetch_add(bytes, Ordering::Relaxed) + bytes;
        self.peak.fetch_max(now, Ordering::Relaxed);
        self.daemon.used.fetch_add(bytes, Ordering::Relaxed);
    }

    fn release(&self, bytes: usize) {
        self.used.fetch_sub(bytes, Ordering::Relaxed);
        self.daemon.used.fetch_sub(bytes, Ordering::Relaxed);
    }

    fn over(&self) -> bool {
        self.used() > self.cap || self.daemon.used() > self.daemon.cap
    }

    /// Makes room when this session or the daemon is over its cap: the session's largest
    /// holders give back first at the session's cap, the largest session's at the daemon's,
    /// each down to its cap less a sixteenth (the session's) or a sixty-fourth (the daemon's).
    /// Called after a record, with no lock of the caller's held.
    pub fn settle(&self) {
        if !self.over() {
            return;
        }
        let _one = self.daemon.reclaiming.lock().unwrap_or_else(PoisonError::into_inner);
        // Bounded: every round frees something or ends the loop.
        for _ in 0..1024 {
            let freed = if self.used() > self.cap {
                self.shed(self.used() - self.cap + self.cap / 16)
            } else if self.daemon.used() > self.daemon.cap {
                let excess = self.daemon.used() - self.daemon.cap + self.daemon.cap / 64;
                match self.daemon.largest() {
                    Some(largest) => largest.shed(excess),
                    None => 0,
                }
            } else {
                return;
            };
            if freed == 0 {
                return;
            }
        }
    }

    /// Takes about `want` bytes from this session's holders, the largest first.
    fn shed(&self, want: usize) -> usize {
        let mut holders: Vec<(usize, Arc<dyn Holder>)> = {
            let holders = self.holders.lock().unwrap_or_else(PoisonError::into_inner);
            holders.iter().filter_map(Weak::upgrade).map(|h| (h.held(), h)).collect()
        };
        holders.sort_by_key(|(held, _)| std::cmp::Reverse(*held));
        let mut freed = 0;
        for (_, holder) in holders {
            if freed >= want {
                break;
            }
            freed += holder.give_back(want - freed);
        }
        freed
    }
}

impl Drop for Ledger {
    fn drop(&mut self) {
        // Whatever is still charged (nothing, once every account is gone) leaves the daemon's.
        let left = self.used.load(Ordering::Relaxed);
        self.daemon.used.fetch_sub(left, Ordering::Relaxed);
        if self.peak.load(Ordering::Relaxed) >= BIG_SESSION_BYTES {
            self.daemon.ended.notify_one();
        }
    }
}

/// One owner's account: the bytes its records hold, charged to a session's ledger (to none
/// while the owner is parked).
#[derive(Default)]
pub struct Account {
    bytes: AtomicUsize,
    ledger: Mutex<Option<Arc<Ledger>>>,
}

impl std::fmt::Debug for Account {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Account").field("bytes", &self.bytes()).finish()
    }
}

impl Account {
    /// An empty account charged to `ledger`.
    pub fn new(ledger: Option<Arc<Ledger>>) -> Arc<Self> {
        Arc::new(Self { bytes: AtomicUsize::new(0), ledger: Mutex::new(ledger) })
    }

    fn ledger(&self) -> std::sync::MutexGuard<'_, Option<Arc<Ledger>>> {
        self.ledger.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Bytes the account holds.
    pub fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Records `bytes` more.
    pub fn add(&self, bytes: usize) {
        if bytes == 0 {
            return;
        }
        let ledger = self.ledger();
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        if let Some(ledger) = ledger.as_ref() {
            ledger.charge(bytes);
        }
    }

    /// Records `bytes` fewer.
    pub fn sub(&self, bytes: usize) {
        if bytes == 0 {
            return;
        }
        let ledger = self.ledger();
        self.bytes.fetch_sub(bytes, Ordering::Relaxed);
        if let Some(ledger) = ledger.as_ref() {
            ledger.release(bytes);
        }
    }

    /// Counts `count` observations forgotten to stay within a cap.
    pub fn evicted(&self, count: usize) {
        if let Some(ledger) = self.ledger().as_ref() {
            ledger.daemon.evicted.fetch_add(count as u64, Ordering::Relaxed);
        }
    }

    /// Makes room if the account's session or the daemon went over its cap (see
    /// [`Ledger::settle`]). Called with no lock of the caller's held.
    pub fn settle(&self) {
        let ledger = self.ledger().clone();
        if let Some(ledger) = ledger {
            ledger.settle();
        }
    }

    /// Charges everything the account holds to `ledger` from now on (none: a parked owner's).
    pub fn move_to(&self, ledger: Option<Arc<Ledger>>) {
        let mut current = self.ledger();
        let bytes = self.bytes();
        if let Some(old) = current.as_ref() {
            old.release(bytes);
        }
        if let Some(new) = ledger.as_ref() {
            new.charge(bytes);
        }
        *current = ledger;
    }
}

impl Drop for Account {
    fn drop(&mut self) {
        let bytes = *self.bytes.get_mut();
        if let Some(ledger) = self.ledger.get_mut().unwrap_or_else(PoisonError::into_inner).as_ref() {
            ledger.release(bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A holder of `n` records of `each` bytes.
    struct Pile {
        account: Arc<Account>,
        each: usize,
        left: Mutex<usize>,
    }

    impl Pile {
        fn new(ledger: &Arc<Ledger>, n: usize, each: usize) -> Arc<Pile> {
            let pile =
                Arc::new(Pile { account: Account::new(Some(ledger.clone())), each, left: Mutex::new(0) });
            let weak: Weak<dyn Holder> = Arc::downgrade(&(pile.clone() as Arc<dyn Holder>));
            ledger.join(weak);
            for _ in 0..n {
                pile.push();
            }
            pile
        }

        fn push(&self) {
            *self.left.lock().unwrap() += 1;
            self.account.add(self.each);
            self.account.settle();
        }

        fn len(&self) -> usize {
            *self.left.lock().unwrap()
        }
    }

    impl Holder for Pile {
        fn held(&self) -> usize {
            self.account.bytes()
        }

        fn give_back(&self, bytes: usize) -> usize {
            let mut left = self.left.lock().unwrap();
            let mut freed = 0;
            while freed < bytes && *left > 1 {
                *left -= 1;
                freed += self.each;
            }
            drop(left);
            self.account.sub(freed);
            freed
        }
    }

    #[test]
    fn a_session_stays_within_its_cap_and_the_largest_holder_pays() {
        let daemon = Ledgers::new(1 << 30, 1600);
        let session = daemon.session();
        let small = Pile::new(&session, 3, 100);
        let big = Pile::new(&session, 10, 100);
        assert_eq!(session.used(), 1300);
        for _ in 0..10 {
            big.push();
        }
        assert!(session.used() <= 1600, "{}", session.used());
        assert_eq!(small.len(), 3, "the small holder kept everything");
        assert!(big.len() >= 1);
        assert_eq!(daemon.used(), session.used());
        drop((small, big));
        assert_eq!((session.used(), daemon.used()), (0, 0));
    }

    #[test]
    fn the_daemon_cap_takes_from_the_largest_session_and_moves_follow_accounts() {
        let daemon = Ledgers::new(2000, 1 << 20);
        let (a, b) = (daemon.session(), daemon.session());
        let in_a = Pile::new(&a, 15, 100);
        let in_b = Pile::new(&b, 8, 100);
        assert!(daemon.used() <= 2000, "{}", daemon.used());
        assert_eq!(in_b.len(), 8, "the smaller session kept everything");
        assert!(in_a.len() < 15);
        // A parked account is counted nowhere; adopted, it counts again.
        let held = in_b.account.bytes();
        in_b.account.move_to(None);
        assert_eq!(b.used(), 0);
        in_b.account.move_to(Some(a.clone()));
        assert_eq!(a.used(), in_a.account.bytes() + held);
        assert_eq!(daemon.used(), a.used());
    }

    #[test]
    fn the_cost_of_an_observation_grows_with_its_path() {
        assert_eq!(observation_bytes(Path::new("/a")), 4 + OBSERVATION_OVERHEAD);
        let long = format!("/{}", "x".repeat(4000));
        assert!(observation_bytes(Path::new(&long)) > 8000);
    }
}
