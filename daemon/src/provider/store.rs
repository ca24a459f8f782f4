//! `ContentStore`: a bounded, content-addressed store of file versions' bytes (version →
//! bytes), so that a refusal of a stale write can show what changed since the version a session
//! last saw. It knows versions and bytes only: which session saw what is the file context's
//! business. Bounded in bytes (whole store, and per version), least recently used out first.

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};

use bytes::{Bytes, BytesMut};

use super::Version;

/// Size of a pack (see [`ContentStore`]): above glibc's mmap threshold as the daemon tunes it
/// (4 MiB), so a pack is a mapping of its own, outside the heap, resident only as it fills.
const PACK_BYTES: usize = 8 * 1024 * 1024;

/// How far ahead of its fill a pack's pages are made resident, in one system call: a new pack's
/// pages are fresh memory, and a page fault for each 4 KiB a version is copied into was an
/// eighth of a cold read's daemon CPU. At most this much of a pack is resident and unfilled.
const PREFAULT_BYTES: usize = 256 * 1024;

/// A version at least this large keeps a buffer of its own instead of a slice of a pack: one
/// large allocation leaves no small holes when it goes, and a buffer the caller owns (a read's
/// or an edit's) is kept without copying it.
const OWN_BUFFER_BYTES: usize = 64 * 1024;

/// The bytes of one stored version (shared: a diff may hold them while the store evicts or
/// moves them).
pub type Content = Bytes;

/// Versions' bytes by version, at most `max_bytes` in all and `max_file_bytes` each.
///
/// Memory: the store keeps bytes for minutes while requests allocate and free around it. Kept
/// in buffers of their own, thousands of versions scattered through the heap, and the small
/// long-lived allocations made between them, kept its pages from ever going back to the system
/// (with 44 MiB of versions kept, the heap stayed 12 MiB larger than what was in use). So a
/// version's bytes are copied into a pack: a large buffer filled front to back, each version a
/// shared slice of it. A pack is freed when none of its versions is stored or held. The cap
/// counts what is held: stored versions and the evicted bytes still in packs; while those are
/// over a quarter of the cap, the pack holding most of them is emptied (its versions move to
/// the open pack) before a stored version is evicted for room, and the idle sweep
/// ([`ContentStore::pack`]) empties the packs more than half evicted.
#[derive(Debug)]
pub struct ContentStore {
    max_bytes: usize,
    max_file_bytes: usize,
    inner: Mutex<Inner>,
}

/// One stored version: its bytes, its pack, the tick of its last use.
#[derive(Debug)]
struct Stored {
    content: Content,
    pack: u64,
    used: u64,
}

/// Bookkeeping of one pack: bytes filled, and those of stored versions.
#[derive(Debug, Default, Clone, Copy)]
struct Pack {
    filled: usize,
    live: usize,
}

#[derive(Debug, Default)]
struct Inner {
    entries: HashMap<Version, Stored>,
    /// (tick, version) of every use, the least recent first; a use that is not its version's
    /// last is skipped when it comes up (and compacted away once they are half the queue). One
    /// buffer, not a tree of nodes scattered through the heap for as long as the versions live.
    order: VecDeque<(u64, Version)>,
    /// Packs holding stored versions, and the open one, by id.
    packs: HashMap<u64, Pack>,
    /// The pack being filled: its id and unfilled room.
    open: Option<(u64, BytesMut)>,
    /// Bytes of the open pack's unfilled room already made resident ([`PREFAULT_BYTES`]).
    ahead: usize,
    next_pack: u64,
    /// Bytes of stored versions.
    bytes: usize,
    /// Bytes filled in packs that belong to no stored version.
    dead: usize,
    tick: u64,
}

impl Inner {
    fn touch(&mut self, version: &Version) -> Option<Content> {
        self.tick += 1;
        let tick = self.tick;
        let stored = self.entries.get_mut(version)?;
        stored.used = tick;
        let content = stored.content.clone();
        self.queue(tick, *version);
        Some(content)
    }

    /// Records a use of `version` at `tick`.
    fn queue(&mut self, tick: u64, version: Version) {
        self.order.push_back((tick, version));
        if self.order.len() > 2 * self.entries.len() + 64 {
            let entries = &self.entries;
            self.order.retain(|(tick, version)| entries.get(version).is_some_and(|s| s.used == *tick));
        }
    }

    /// The least recently used stored version, taken off the queue.
    fn oldest(&mut self) -> Option<Version> {
        while let Some((tick, version)) = self.order.pop_front() {
            if self.entries.get(&version).is_some_and(|s| s.used == tick) {
                return Some(version);
            }
        }
        None
    }

    /// Copies `bytes` into the open pack (a new one when it has no room; packs are at least
    /// `pack_bytes`), and counts them as stored.
    fn copy_in(&mut self, bytes: &[u8], pack_bytes: usize) -> (Content, u64) {
        let (id, open) = match self.open.take() {
            Some((id, open)) if open.capacity() - open.len() >= bytes.len() => self.open.insert((id, open)),
            full => {
                if let Some((old, _)) = full {
                    self.close_if_empty(old);
                }
                let id = self.next_pack;
                self.next_pack += 1;
                self.packs.insert(id, Pack::default());
                self.ahead = 0;
                self.open.insert((id, BytesMut::with_capacity(pack_bytes.max(bytes.len()))))
            }
        };
        let id = *id;
        if self.ahead < bytes.len() {
            let room = open.spare_capacity_mut();
            let ahead = bytes.len().saturating_add(PREFAULT_BYTES).min(room.len());
            crate::memory::prefault(&mut room[..ahead]);
            self.ahead = ahead;
        }
        open.extend_from_slice(bytes);
        self.ahead -= bytes.len();
        let content = open.split().freeze();
        let pack = self.packs.entry(id).or_default();
        pack.filled += bytes.len();
        pack.live += bytes.len();
        self.bytes += bytes.len();
        (content, id)
    }

    /// Keeps `bytes` as a pack of their own (never the open one), and counts them as stored;
    /// spare capacity counts as held, not stored.
    fn own(&mut self, bytes: Vec<u8>) -> (Content, u64) {
        let id = self.next_pack;
        self.next_pack += 1;
        let (len, capacity) = (bytes.len(), bytes.capacity());
        self.packs.insert(id, Pack { filled: capacity, live: len });
        self.bytes += len;
        self.dead += capacity - len;
        (Bytes::from(bytes), id)
    }

    /// Counts a stored version's bytes as evicted (its pack may go).
    fn release(&mut self, len: usize, pack: u64) {
        self.bytes -= len;
        let Some(p) = self.packs.get_mut(&pack) else { return };
        p.live -= len;
        self.dead += len;
        if p.live == 0 && self.open.as_ref().is_none_or(|(open, _)| *open != pack) {
            self.close_if_empty(pack);
        }
    }

    /// Moves the stored versions of pack `id` (not the open one) into the open pack, so that
    /// `id` goes; returns their old bytes, to be dropped after the lock, and how many moved.
    fn empty(&mut self, id: u64, pack_bytes: usize) -> (Vec<Content>, usize) {
        let moving: Vec<Version> =
            self.entries.iter().filter(|(_, s)| s.pack == id).map(|(v, _)| *v).collect();
        let mut old = Vec::with_capacity(moving.len());
        for version in &moving {
            let Some(stored) = self.entries.get(version) else { continue };
            let from = stored.content.clone();
            self.release(from.len(), id);
            let (content, to) = self.copy_in(&from, pack_bytes);
            if let Some(stored) = self.entries.get_mut(version) {
                stored.content = content;
                stored.pack = to;
            }
            old.push(from);
        }
        (old, moving.len())
    }

    /// The pack (not the open one) with the most evicted bytes, if any has some.
    fn most_evicted(&self) -> Option<u64> {
        let open = self.open.as_ref().map(|(id, _)| *id);
        self.packs
            .iter()
            .filter(|(id, p)| Some(**id) != open && p.live < p.filled)
            .max_by_key(|(_, p)| p.filled - p.live)
            .map(|(id, _)| *id)
    }

    /// Forgets a pack (no longer open) that holds no stored version.
    fn close_if_empty(&mut self, pack: u64) {
        if let Some(p) = self.packs.get(&pack).copied()
            && p.live == 0
        {
            self.packs.remove(&pack);
            self.dead -= p.filled;
        }
    }
}

impl ContentStore {
    /// An empty store holding at most `max_bytes`, and no version over `max_file_bytes`.
    pub fn new(max_bytes: usize, max_file_bytes: usize) -> Self {
        Self { max_bytes, max_file_bytes: max_file_bytes.min(max_bytes), inner: Mutex::default() }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The size of a new pack: an eighth of the cap at most, so that the evicted bytes the
    /// open pack may hold leave most of the cap to stored versions.
    fn pack_bytes(&self) -> usize {
        PACK_BYTES.min(self.max_bytes / 8)
    }

    /// The largest version stored.
    pub fn max_file_bytes(&self) -> usize {
        self.max_file_bytes
    }

    /// Whether a version of `len` bytes may be stored at all (callers check before copying).
    pub fn fits(&self, len: usize) -> bool {
        len <= self.max_file_bytes
    }

    /// Stores `bytes` as `version`'s content (which they must be: warm reads cut windows from
    /// them once the file is checked to be that version): copied into a pack, or
    /// kept as they are from [`OWN_BUFFER_BYTES`] on; a version already stored only counts as
    /// used. Evicts the least recently used versions
    /// past the cap.
    pub fn put(&self, version: Version, bytes: Cow<'_, [u8]>) {
        if !self.fits(bytes.len()) {
            return;
        }
        let evicted = {
            let mut inner = self.lock();
            if inner.touch(&version).is_some() {
                return;
            }
            inner.tick += 1;
            let tick = inner.tick;
            let (content, pack) = if bytes.len() >= OWN_BUFFER_BYTES {
                inner.own(bytes.into_owned())
            } else {
                inner.copy_in(&bytes, self.pack_bytes())
            };
            inner.entries.insert(version, Stored { content, pack, used: tick });
            inner.queue(tick, version);
            let mut evicted = Vec::new();
            // Held bytes (stored, and evicted ones still in packs) within the cap. While
            // evicted bytes are over a quarter of it, the pack holding most of them is emptied
            // (its stored versions move to the open pack, and it goes); else the least recently
            // used version goes. Stored versions therefore keep at least the cap less a quarter
            // and less one pack (the open pack's evicted bytes).
            while inner.bytes + inner.dead > self.max_bytes {
                if inner.dead > self.max_bytes / 4
                    && let Some(id) = inner.most_evicted()
                {
                    let (old, _) = inner.empty(id, self.pack_bytes());
                    evicted.extend(old);
                    continue;
                }
                let Some(oldest) = inner.oldest() else { break };
                if let Some(stored) = inner.entries.remove(&oldest) {
                    inner.release(stored.content.len(), stored.pack);
                    evicted.push(stored.content);
                }
            }
            evicted
        };
        // Freed after the lock is released.
        drop(evicted);
    }

    /// The bytes of `version`, if stored (counts as a use).
    pub fn get(&self, version: &Version) -> Option<Content> {
        self.lock().touch(version)
    }

    /// The bytes of `version`, if stored, without counting a use (a warm read cuts its
    /// window from them: it must not keep a version in the store that no refusal would show).
    pub fn peek(&self, version: &Version) -> Option<Content> {
        self.lock().entries.get(version).map(|stored| stored.content.clone())
    }

    /// Versions stored.
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes held: the stored versions', and the evicted ones' still in packs.
    pub fn bytes(&self) -> usize {
        let inner = self.lock();
        inner.bytes + inner.dead
    }

    /// Moves the versions of every pack (but the open one) that is more than half evicted into
    /// the open pack, so the pack can be freed; returns how many versions moved. For the idle sweep, before
    /// memory goes back to the system.
    pub fn pack(&self) -> usize {
        let mut inner = self.lock();
        let open = inner.open.as_ref().map(|(id, _)| *id);
        let sparse: Vec<u64> = inner
            .packs
            .iter()
            .filter(|(id, p)| Some(**id) != open && p.live * 2 < p.filled)
            .map(|(id, _)| *id)
            .collect();
        let mut old = Vec::new();
        let mut moved = 0;
        let pack_bytes = self.pack_bytes();
        for id in sparse {
            let (bytes, count) = inner.empty(id, pack_bytes);
            old.extend(bytes);
            moved += count;
        }
        drop(inner);
        // The emptied packs are freed here, after the lock (unless a diff still holds a slice).
        drop(old);
        moved
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
        store.put(big.0, Cow::Borrowed(&big.1));
        assert!(store.is_empty(), "over the per-version cap");
        store.put(a.0, Cow::Borrowed(&a.1));
        store.put(b.0, Cow::Borrowed(&b.1));
        store.put(a.0, Cow::Borrowed(&a.1));
        assert_eq!((store.len(), store.bytes()), (2, 8), "a stored once");
        assert!(store.get(&a.0).is_some());
        store.put(c.0, Cow::Borrowed(&c.1));
        assert!(store.bytes() <= 10);
        assert!(store.get(&b.0).is_none(), "b was used least recently");
        assert_eq!(store.get(&a.0).as_deref(), Some(b"aaaa".as_slice()));
        assert!(store.get(&c.0).is_some());
    }

    #[test]
    fn a_zero_cap_stores_nothing() {
        let store = ContentStore::new(0, 1024);
        let (v, bytes) = content("");
        store.put(v, Cow::Borrowed(&bytes));
        let (v, bytes) = content("a");
        store.put(v, Cow::Borrowed(&bytes));
        assert!(store.len() <= 1 && store.bytes() == 0);
    }

    fn texts(n: usize, len: usize) -> Vec<(Version, Vec<u8>)> {
        (0..n)
            .map(|i| {
                let text = format!("{i:0len$}\n");
                content(&text)
            })
            .collect()
    }

    /// The store's books add up: what it says it holds is its packs' filled bytes.
    fn check_books(store: &ContentStore) {
        let inner = store.lock();
        let stored: usize = inner.entries.values().map(|s| s.content.len()).sum();
        let filled: usize = inner.packs.values().map(|p| p.filled).sum();
        assert_eq!(inner.bytes, stored);
        assert_eq!(inner.bytes + inner.dead, filled);
        for (id, pack) in &inner.packs {
            let live: usize = inner.entries.values().filter(|s| s.pack == *id).map(|s| s.content.len()).sum();
            assert_eq!(pack.live, live, "pack {id}");
        }
    }

    #[test]
    fn versions_share_a_pack_and_keep_their_bytes() {
        let store = ContentStore::new(1 << 20, 4096);
        let versions = texts(100, 99);
        for (v, bytes) in versions.clone() {
            store.put(v, Cow::Borrowed(&bytes));
        }
        assert_eq!(store.bytes(), 100 * 100, "exact lengths, nothing evicted");
        assert_eq!(store.pack(), 0, "no pack to empty");
        for (v, bytes) in &versions {
            assert_eq!(store.get(v).as_deref(), Some(bytes.as_slice()));
        }
        assert_eq!(store.lock().packs.len(), 1);
        check_books(&store);
    }

    #[test]
    fn evicting_keeps_what_is_held_within_the_cap_and_the_least_recently_used_go() {
        // Room for 60 versions of 100 bytes; packs of 750 bytes (7 versions).
        let store = ContentStore::new(6_000, 4096);
        let all = texts(300, 99);
        for (i, (v, bytes)) in all.iter().cloned().enumerate() {
            store.put(v, Cow::Borrowed(&bytes));
            assert!(store.bytes() <= 6_000, "held {} after {} puts", store.bytes(), i + 1);
            check_books(&store);
        }
        // The most recent versions are there, with their bytes: at least the cap less a quarter
        // and less a pack (6,000 - 1,500 - 750 = 3,750 bytes: 37 versions).
        assert!(store.len() >= 37, "{}", store.len());
        for (v, bytes) in all.iter().rev().take(37) {
            assert_eq!(store.get(v).as_deref(), Some(bytes.as_slice()));
        }
        assert!(store.get(&all[0].0).is_none());
    }

    #[test]
    fn the_sweep_empties_packs_mostly_evicted() {
        // Cap 8,000: packs of 1,000 bytes (ten versions).
        let all = texts(130, 99);
        let store = ContentStore::new(8_000, 4096);
        for (v, bytes) in all.iter().take(80).cloned() {
            store.put(v, Cow::Borrowed(&bytes));
        }
        // Use the last of every pack of ten, then push the rest out with new versions.
        for i in (9..80).step_by(10) {
            let _ = store.get(&all[i].0);
        }
        for (v, bytes) in all.iter().skip(80).take(50).cloned() {
            store.put(v, Cow::Borrowed(&bytes));
            check_books(&store);
        }
        let before = store.bytes();
        let moved = store.pack();
        check_books(&store);
        assert!(store.bytes() <= before, "{} > {before}", store.bytes());
        let inner = store.lock();
        let open = inner.open.as_ref().map(|(id, _)| *id);
        assert!(
            inner.packs.iter().all(|(id, p)| Some(*id) == open || p.live * 2 >= p.filled),
            "moved {moved}: {:?}",
            inner.packs
        );
    }

    #[test]
    fn versions_kept_in_use_cannot_pin_evicted_bytes_past_the_cap() {
        // The attack: keep one version of every pack in use while the rest is evicted, so that
        // every pack would stay. Cap 8,000: packs of 1,000 bytes (ten versions).
        let store = ContentStore::new(8_000, 4096);
        let all = texts(2_000, 99);
        for (i, (v, bytes)) in all.iter().cloned().enumerate() {
            store.put(v, Cow::Borrowed(&bytes));
            let kept = &all[i - i % 10].0;
            let _ = store.get(kept);
            assert!(store.bytes() <= 8_000, "held {} after {} puts", store.bytes(), i + 1);
        }
        check_books(&store);
    }

    #[test]
    fn a_large_version_keeps_the_callers_buffer_and_goes_whole() {
        let store = ContentStore::new(1 << 20, 1 << 20);
        let mut big = Vec::with_capacity(100_000);
        big.resize(OWN_BUFFER_BYTES + 1, b'x');
        let (version, at) = (Version::of(&big), big.as_ptr());
        store.put(version, Cow::Owned(big));
        let kept = store.get(&version).unwrap_or_else(|| panic!("stored"));
        assert_eq!(kept.as_ptr(), at, "not copied");
        assert_eq!(store.bytes(), 100_000, "its spare capacity is held too");
        check_books(&store);
        let own = store.lock().entries.get(&version).map(|s| s.pack);
        // Evicted, it leaves nothing behind.
        for (v, bytes) in texts(10_000, 99) {
            store.put(v, Cow::Owned(bytes));
        }
        assert!(store.get(&version).is_none());
        check_books(&store);
        assert!(own.is_some_and(|own| !store.lock().packs.contains_key(&own)));
    }

    #[test]
    fn bytes_held_elsewhere_stay_valid_and_an_emptied_pack_is_not_counted() {
        let store = ContentStore::new(8_000, 4096);
        let versions = texts(80, 99);
        for (v, bytes) in versions.clone() {
            store.put(v, Cow::Borrowed(&bytes));
        }
        // A diff holds one version's bytes while everything is evicted.
        let held = store.get(&versions[3].0).unwrap_or_else(|| panic!("stored"));
        for (v, bytes) in texts(400, 99).into_iter().skip(80) {
            store.put(v, Cow::Borrowed(&bytes));
        }
        assert_eq!(&*held, versions[3].1.as_slice());
        check_books(&store);
        let inner = store.lock();
        assert!(inner.entries.keys().all(|v| versions.iter().all(|(old, _)| old != v)));
    }
}
