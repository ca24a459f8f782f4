//! `ContentStore`: a bounded, content-addressed store of file versions' bytes (version →
//! bytes), so that a refusal of a stale write can show what changed since the version a session
//! last saw. It knows versions and bytes only: which session saw what is the file context's
//! business. Bounded in bytes (whole store, and per version), least recently used out first.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use super::Version;

/// The bytes of one stored version (shared: a diff may hold them while the store evicts).
pub type Content = Arc<Vec<u8>>;

/// Versions' bytes by version, at most `max_bytes` in all and `max_file_bytes` each.
#[derive(Debug)]
pub struct ContentStore {
    max_bytes: usize,
    max_file_bytes: usize,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Version → (its bytes, the tick of its last use).
    entries: HashMap<Version, (Content, u64)>,
    /// Tick of last use → version: the least recently used first.
    order: BTreeMap<u64, Version>,
    /// Bytes held (the buffers' capacities).
    bytes: usize,
    tick: u64,
}

impl Inner {
    fn touch(&mut self, version: &Version) -> Option<Content> {
        self.tick += 1;
        let tick = self.tick;
        let (content, used) = self.entries.get_mut(version)?;
        self.order.remove(used);
        *used = tick;
        self.order.insert(tick, *version);
        Some(content.clone())
    }
}

impl ContentStore {
    /// An empty store holding at most `max_bytes`, and no version over `max_file_bytes`.
    pub fn new(max_bytes: usize, max_file_bytes: usize) -> Self {
        Self { max_bytes, max_file_bytes: max_file_bytes.min(max_bytes), inner: Mutex::default() }
    }

    /// The largest version stored.
    pub fn max_file_bytes(&self) -> usize {
        self.max_file_bytes
    }

    /// Whether a version of `len` bytes may be stored at all (callers check before copying).
    pub fn fits(&self, len: usize) -> bool {
        len <= self.max_file_bytes
    }

    /// Stores `bytes` as `version`'s content (which they must be); a version already stored
    /// only counts as used. Evicts the least recently used versions past the cap.
    pub fn put(&self, version: Version, bytes: Vec<u8>) {
        if !self.fits(bytes.len()) {
            return;
        }
        let evicted = {
            let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            if inner.touch(&version).is_some() {
                return;
            }
            inner.tick += 1;
            let tick = inner.tick;
            inner.bytes += bytes.capacity();
            inner.entries.insert(version, (Arc::new(bytes), tick));
            inner.order.insert(tick, version);
            let mut evicted = Vec::new();
            while inner.bytes > self.max_bytes {
                let Some((_, oldest)) = inner.order.pop_first() else { break };
                if let Some((content, _)) = inner.entries.remove(&oldest) {
                    inner.bytes -= content.capacity();
                    evicted.push(content);
                }
            }
            evicted
        };
        // Freed after the lock is released.
        drop(evicted);
    }

    /// The bytes of `version`, if stored (counts as a use).
    pub fn get(&self, version: &Version) -> Option<Content> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner).touch(version)
    }

    /// Versions stored.
    pub fn len(&self) -> usize {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner).entries.len()
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner).bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn content(text: &str) -> (Version, Vec<u8>) {
        let mut bytes = Vec::with_capacity(text.len());
        bytes.extend_from_slice(text.as_bytes());
        (Version::of(text.as_bytes()), bytes)
    }

    #[test]
    fn stays_under_its_caps_and_forgets_the_least_recently_used() {
        let store = ContentStore::new(10, 4);
        let (a, b, c, big) = (content("aaaa"), content("bbbb"), content("cccc"), content("xxxxx"));
        store.put(big.0, big.1);
        assert!(store.is_empty(), "over the per-version cap");
        store.put(a.0, a.1.clone());
        store.put(b.0, b.1);
        store.put(a.0, a.1);
        assert_eq!((store.len(), store.bytes()), (2, 8), "a stored once");
        assert!(store.get(&a.0).is_some());
        store.put(c.0, c.1);
        assert!(store.bytes() <= 10);
        assert!(store.get(&b.0).is_none(), "b was used least recently");
        assert_eq!(store.get(&a.0).as_deref().map(Vec::as_slice), Some(b"aaaa".as_slice()));
        assert!(store.get(&c.0).is_some());
    }

    #[test]
    fn a_zero_cap_stores_nothing() {
        let store = ContentStore::new(0, 1024);
        let (v, bytes) = content("");
        store.put(v, bytes);
        let (v, bytes) = content("a");
        store.put(v, bytes);
        assert!(store.len() <= 1 && store.bytes() == 0);
    }
}
