//! The budget of bytes mapped at once (`max_mapped_bytes`), enforced when a file is mapped —
//! not only when its cache entry is inserted: a mapping reserves its length first and gives it
//! back when it is unmapped (whoever held it last: the cache, or a snapshot still reading after
//! its entry was evicted), so neither one huge file nor many loads at once ever map more than
//! the cap. A file that does not fit is read with positional reads instead.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

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
}
