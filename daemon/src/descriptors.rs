//! The daemon's budget of file descriptors: what connections, session roots and the provider's
//! cached open files may hold, out of the process's open-file limit (`RLIMIT_NOFILE`, whose
//! soft limit the binary raises to the hard one at start).
//!
//! Of the limit, what was open when the daemon started and a reserve ([`reserve_for`]) are
//! never handed out: the reserve is what accepting, answering, the watcher and the requests in
//! flight (an open file, a folder, a staging file each) use for a moment. The rest, the budget,
//! is shared: a connection is admitted while there is room for it and its first root; a
//! session's roots beyond its first never take the last quarter of the budget (kept for new
//! connections and their first root), and take at most half of what is left above it, so that
//! later sessions still find room however greedy the earlier ones were; the cache keeps files
//! open only while less than half of the budget is held, and gives them up (the least recently
//! used first) when a connection or a session needs the room. Charges are given back when what
//! they pay for is closed.

use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

/// The reserve kept out of the budget for a limit of `limit` descriptors: an eighth of it, at
/// least 64 and at most 1024, and never more than half of it.
pub fn reserve_for(limit: usize) -> usize {
    (limit / 8).clamp(64, 1024).min(limit / 2)
}

/// Descriptors this process has open now (`/proc/self/fd`); `None` without `/proc`.
pub fn open_now() -> Option<usize> {
    // The listing's own descriptor is one of the entries.
    Some(std::fs::read_dir("/proc/self/fd").ok()?.count().saturating_sub(1))
}

/// What is held, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Held {
    connections: usize,
    roots: usize,
    /// Set by the cache (see [`Descriptors::set_cached`]).
    cached: usize,
}

impl Held {
    fn total(&self) -> usize {
        self.connections + self.roots + self.cached
    }
}

/// What a charge pays for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Connection,
    Root,
}

/// How the cache gives up open files when told to (registered by the file service).
type Shed = Box<dyn Fn(usize) + Send + Sync>;

/// The daemon's descriptor budget (see the module's documentation).
pub struct Descriptors {
    limit: usize,
    reserve: usize,
    budget: usize,
    held: Mutex<Held>,
    shed: OnceLock<Shed>,
}

impl std::fmt::Debug for Descriptors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Descriptors")
            .field("limit", &self.limit)
            .field("reserve", &self.reserve)
            .field("budget", &self.budget)
            .field("held", &*self.held())
            .finish_non_exhaustive()
    }
}

impl Default for Descriptors {
    /// A budget nothing runs out of (for a file service or sessions made without a daemon).
    fn default() -> Self {
        Self::with_budget(usize::MAX, 0, usize::MAX / 2)
    }
}

/// One descriptor of the budget, given back when dropped.
#[derive(Debug)]
pub struct Charge {
    budget: Arc<Descriptors>,
    kind: Kind,
}

impl Drop for Charge {
    fn drop(&mut self) {
        let mut held = self.budget.held();
        match self.kind {
            Kind::Connection => held.connections = held.connections.saturating_sub(1),
            Kind::Root => held.roots = held.roots.saturating_sub(1),
        }
    }
}

/// Roots a session may open, granted at once: each [`Grant::take`] is the charge of one; what
/// was not taken is given back when the grant is dropped.
#[derive(Debug)]
pub struct Grant {
    budget: Arc<Descriptors>,
    left: usize,
}

impl Grant {
    /// The charge of one more root, while the grant lasts.
    pub fn take(&mut self) -> Option<Charge> {
        self.left = self.left.checked_sub(1)?;
        Some(Charge { budget: self.budget.clone(), kind: Kind::Root })
    }
}

impl Drop for Grant {
    fn drop(&mut self) {
        let mut held = self.budget.held();
        held.roots = held.roots.saturating_sub(self.left);
    }
}

/// Why roots were not granted: how many this session may have now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Short {
    /// The most roots a session may get now (0: none).
    pub allowed: usize,
}

/// The budget's figures, for `daemon/status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// The open-file limit.
    pub limit: usize,
    /// What is kept out of the budget for accepting, answering and work in flight.
    pub reserve: usize,
    /// What connections, roots and cached files may hold.
    pub budget: usize,
    /// Connections held.
    pub connections: usize,
    /// Session roots held (one directory handle each).
    pub roots: usize,
    /// Cached files held open.
    pub cached: usize,
}

impl Descriptors {
    /// The budget of a process whose open-file limit is `limit` and which had `baseline`
    /// descriptors open when the daemon started.
    pub fn new(limit: usize, baseline: usize) -> Arc<Self> {
        let reserve = reserve_for(limit);
        Arc::new(Self::with_budget(limit, reserve, limit.saturating_sub(baseline).saturating_sub(reserve)))
    }

    /// The budget of this process, from its open-file limit and what it has open now.
    pub fn of_this_process() -> Arc<Self> {
        let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
        // No limit at all is not a thing for descriptors on Linux; take the kernel's ceiling.
        let limit = limit.and_then(|n| usize::try_from(n).ok()).unwrap_or(1 << 20);
        Self::new(limit, open_now().unwrap_or(16))
    }

    fn with_budget(limit: usize, reserve: usize, budget: usize) -> Self {
        Self { limit, reserve, budget, held: Mutex::new(Held::default()), shed: OnceLock::new() }
    }

    fn held(&self) -> MutexGuard<'_, Held> {
        // A few integers changed in one step: a poisoned lock still holds a consistent state.
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers how the cache gives up `n` open files (once).
    pub fn on_pressure(&self, shed: Shed) {
        let _ = self.shed.set(shed);
    }

    /// What may still be had, counting the cache's open files (it gives them up), and what is
    /// free without them.
    fn room(&self, held: &Held) -> (usize, usize) {
        let free = self.budget.saturating_sub(held.total());
        (free + held.cached, free)
    }

    /// Asks the cache to give up open files when `free` is short of `needed`.
    fn make_room(&self, needed: usize, free: usize) {
        if needed > free
            && let Some(shed) = self.shed.get()
        {
            shed(needed - free);
        }
    }

    /// The charge of a new connection's socket, when there is room for it and for its first
    /// root; `None`: the connection is to be refused.
    pub fn connection(self: &Arc<Self>) -> Option<Charge> {
        let free = {
            let mut held = self.held();
            let (room, free) = self.room(&held);
            if room < 2 {
                return None;
            }
            held.connections += 1;
            free
        };
        self.make_room(1, free);
        Some(Charge { budget: self.clone(), kind: Kind::Connection })
    }

    /// The most roots one session may be granted now: its first, and at most half of what is
    /// left beyond it above the last quarter of the budget.
    pub fn roots_allowed(&self) -> usize {
        let held = self.held();
        self.allowed(self.room(&held).0)
    }

    /// Roots one session may have when `room` descriptors may still be had.
    fn allowed(&self, room: usize) -> usize {
        match room {
            0 => 0,
            room => 1 + room.saturating_sub(1 + self.budget / 4) / 2,
        }
    }

    /// Grants `n` roots to a session, if it may have that many now (see
    /// [`Descriptors::roots_allowed`]).
    pub fn roots(self: &Arc<Self>, n: usize) -> Result<Grant, Short> {
        let free = {
            let mut held = self.held();
            let (room, free) = self.room(&held);
            let allowed = self.allowed(room);
            if n > allowed {
                return Err(Short { allowed });
            }
            held.roots += n;
            free
        };
        self.make_room(n, free);
        Ok(Grant { budget: self.clone(), left: n })
    }

    /// Whether the cache may keep one more file open: only while less than half of the budget
    /// is held, so that it never stands in the way of connections and roots.
    pub fn may_cache(&self) -> bool {
        self.held().total() < self.budget / 2
    }

    /// Tells the budget how many files the cache holds open now.
    pub fn set_cached(&self, open: usize) {
        self.held().cached = open;
    }

    /// The figures, for `daemon/status`.
    pub fn usage(&self) -> Usage {
        let held = *self.held();
        Usage {
            limit: self.limit,
            reserve: self.reserve,
            budget: self.budget,
            connections: held.connections,
            roots: held.roots,
            cached: held.cached,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reserve_is_an_eighth_within_bounds() {
        assert_eq!(reserve_for(256), 64);
        assert_eq!(reserve_for(20_000), 1024);
        assert_eq!(reserve_for(4096), 512);
        assert_eq!(reserve_for(100), 50, "never more than half");
    }

    #[test]
    fn each_session_takes_at_most_half_of_what_is_left_and_gives_it_back() {
        // 16 open at start, 64 reserved: 176 to share.
        let budget = Descriptors::new(256, 16);
        assert_eq!(budget.usage().budget, 176);
        let victim = (budget.connection().unwrap(), budget.roots(1).unwrap());
        let attacker = budget.connection().unwrap();
        // 173 left: the first root, and half of the 172 beyond it above the last quarter (44).
        assert_eq!(budget.roots_allowed(), 1 + (172 - 44) / 2);
        assert_eq!(budget.roots(200).unwrap_err(), Short { allowed: 65 });
        let mut first = budget.roots(65).unwrap();
        let opened: Vec<Charge> = (0..60).map(|_| first.take().unwrap()).collect();
        drop(first);
        assert_eq!(budget.usage().roots, 1 + 60, "what was not taken went back");
        // Greedy sessions, each taking all it may: fewer each time, and never the last quarter.
        let mut later = Vec::new();
        for _ in 0..20 {
            let connection = budget.connection().unwrap();
            let allowed = budget.roots_allowed();
            later.push((connection, budget.roots(allowed).unwrap()));
        }
        let usage = budget.usage();
        assert!(usage.budget - (usage.connections + usage.roots) >= 44 - 20 * 2, "{usage:?}");
        // That quarter still takes new sessions of one root each, until it is spent; then a
        // connection is refused before its root could be.
        let mut newcomers = 0;
        while let Some(connection) = budget.connection() {
            later.push((connection, budget.roots(1).unwrap()));
            newcomers += 1;
        }
        assert!(newcomers >= 2, "{newcomers}");
        let usage = budget.usage();
        assert!(usage.connections + usage.roots <= usage.budget, "{usage:?}");
        drop((victim, attacker, opened, later));
        assert_eq!(budget.usage().connections + budget.usage().roots, 0);
    }

    #[test]
    fn cached_files_give_way_to_sessions() {
        let budget = Descriptors::new(256, 16);
        let shed = Arc::new(Mutex::new(Vec::new()));
        let asked = shed.clone();
        budget.on_pressure(Box::new(move |n| asked.lock().unwrap().push(n)));
        // The cache may fill up to half of the budget, no more.
        budget.set_cached(87);
        assert!(budget.may_cache());
        budget.set_cached(88);
        assert!(!budget.may_cache());
        // A session may count on the cache's files; taking them asks the cache for them.
        let _c = budget.connection().unwrap();
        assert_eq!(budget.roots_allowed(), 1 + (175 - 1 - 44) / 2);
        let _roots = budget.roots(60).unwrap();
        assert!(shed.lock().unwrap().is_empty(), "there was room without the cache's files");
        let _more = budget.connection().unwrap();
        let _roots2 = budget.roots(budget.roots_allowed()).unwrap();
        assert!(!shed.lock().unwrap().is_empty(), "the cache was asked to give files up");
    }
}
