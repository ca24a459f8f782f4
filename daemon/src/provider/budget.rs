//! The budget of bytes mapped at once (`max_mapped_bytes`), enforced when a file is mapped —
//! not only when its cache entry is inserted: a mapping reserves its length first and gives it
//! back when it is unmapped (whoever held it last: the cache, or a snapshot still reading after
//! its entry was evicted), so neither one huge file nor many loads at once ever map more than
//! the cap. A file that does not fit is read with positional reads instead.
//!
//! Also the daemon's share of the user's inotify watches (`max_watches`), held by the warm
//! listings and the file watcher together, so that searches over big trees never leave the
//! user's other programs without watches (`ENOSPC`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Bytes that may be mapped at once, and how many are reserved now.
#[derive(Debug)]
pub struct MapBudget {
    cap: usize,
    used: AtomicUsize,
}

/// Bytes of the budget held by one mapping; given back when dropped.
#[derive(Debug)]
pub struct Reservation {
    budget: Arc<MapBudget>,
    bytes: usize,
}

impl MapBudget {
    /// A budget of `cap` bytes, none used.
    pub fn new(cap: usize) -> Arc<Self> {
        Arc::new(Self { cap, used: AtomicUsize::new(0) })
    }

    /// Reserves `bytes` if they fit in what is left; `None` otherwise.
    pub fn reserve(self: &Arc<Self>, bytes: usize) -> Option<Reservation> {
        if bytes > self.cap {
            return None;
        }
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes).filter(|total| *total <= self.cap)
            })
            .ok()?;
        Some(Reservation { budget: self.clone(), bytes })
    }

    /// Bytes reserved now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }

    /// The cap.
    pub fn cap(&self) -> usize {
        self.cap
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

/// The most watches [`default_max_watches`] takes, however high the user's limit: each costs the
/// kernel about a KiB.
pub const MAX_DEFAULT_WATCHES: usize = 65_536;

/// The user's limit on inotify watches, `fs.inotify.max_user_watches` (all their programs'
/// watches together); `None` when it cannot be read.
pub fn user_watch_limit() -> Option<usize> {
    std::fs::read_to_string("/proc/sys/fs/inotify/max_user_watches").ok()?.trim().parse().ok()
}

/// Default of `max_watches`: a quarter of the user's limit, at most [`MAX_DEFAULT_WATCHES`]
/// (2,048, a quarter of the kernel's smallest default, when the limit cannot be read).
pub fn default_max_watches() -> usize {
    user_watch_limit().map_or(2048, |limit| (limit / 4).min(MAX_DEFAULT_WATCHES))
}

/// The daemon's share of the user's inotify watches: how many it may hold at once (warm
/// listings and the file watcher together), and how many it holds. A watch is taken before it
/// is added and given back when it is removed. Listings may take up to three quarters of the
/// cap; the last quarter is the watcher's, so a search over a big tree never costs the
/// sessions their change notifications. A listing that cannot be watched is not kept (its
/// searches walk); a folder the watcher cannot watch has its files checked when next used, as
/// every file is. The first refusal is logged (once).
#[derive(Debug)]
pub struct WatchBudget {
    cap: usize,
    held: AtomicUsize,
    told: AtomicBool,
}

impl WatchBudget {
    /// At most `cap` watches, none held.
    pub fn new(cap: usize) -> Arc<Self> {
        Arc::new(Self { cap, held: AtomicUsize::new(0), told: AtomicBool::new(false) })
    }

    /// Takes one watch for a warm listing: refused once three quarters of the cap are held.
    pub fn take_for_listing(&self) -> bool {
        self.take(self.cap - self.cap / 4)
    }

    /// Takes one watch for the file watcher: refused at the cap.
    pub fn take_for_watcher(&self) -> bool {
        self.take(self.cap)
    }

    fn take(&self, limit: usize) -> bool {
        let taken = self
            .held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| (held < limit).then_some(held + 1))
            .is_ok();
        if !taken && !self.told.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                held = self.held(),
                cap = self.cap,
                "the daemon holds its share of inotify watches (max_watches): searches of folders that need more walk them every time, and changes to files in folders it cannot watch are found when the files are next used instead of notified; raise --max-watches (keep it well below fs.inotify.max_user_watches, which every program of the user shares)"
            );
        }
        taken
    }

    /// Gives one watch back.
    pub fn give(&self) {
        // Never below zero, whatever a caller's mistake: a wrapped count would refuse forever.
        let _ = self.held.fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| held.checked_sub(1));
    }

    /// Watches held now.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Acquire)
    }

    /// The cap.
    pub fn cap(&self) -> usize {
        self.cap
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_never_exceed_the_cap_and_come_back() {
        let budget = MapBudget::new(100);
        assert!(budget.reserve(101).is_none(), "one file bigger than the whole budget");
        let a = budget.reserve(60).unwrap();
        assert!(budget.reserve(41).is_none(), "bigger than what is left");
        let b = budget.reserve(40).unwrap();
        assert_eq!(budget.used(), 100);
        drop(a);
        assert_eq!(budget.used(), 40);
        assert!(budget.reserve(60).is_some());
        drop(b);
        assert_eq!(budget.used(), 0);
    }

    #[test]
    fn listings_leave_the_watchers_quarter_of_the_watch_cap() {
        let budget = WatchBudget::new(8);
        assert!((0..6).all(|_| budget.take_for_listing()));
        assert!(!budget.take_for_listing(), "the last quarter is the watcher's");
        assert!(budget.take_for_watcher() && budget.take_for_watcher());
        assert!(!budget.take_for_watcher(), "at the cap");
        assert_eq!((budget.held(), budget.cap()), (8, 8));
        budget.give();
        assert!(!budget.take_for_listing() && budget.take_for_watcher());
        (0..20).for_each(|_| budget.give());
        assert_eq!(budget.held(), 0, "never below zero");
        let none = WatchBudget::new(0);
        assert!(!none.take_for_listing() && !none.take_for_watcher());
        assert!(default_max_watches() <= MAX_DEFAULT_WATCHES);
        if let Some(limit) = user_watch_limit() {
            assert_eq!(default_max_watches(), (limit / 4).min(MAX_DEFAULT_WATCHES));
        }
    }
}
