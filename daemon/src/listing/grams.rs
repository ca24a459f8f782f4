//! Trigram filters of a warm listing's files: for each file a search has read whole, a small
//! bit set of the (ASCII-case-folded) three-byte sequences of letters, `_` and spaces it holds
//! (see [`word_byte`]). A later search whose pattern needs a literal with such trigrams skips
//! every file whose filter lacks one of them, without opening it. A filter can say "maybe"
//! wrongly, never "no" wrongly: a file that changes loses its filter (the listing's watch
//! reports it), a filter built from bytes read while an event arrived is never kept, and a file
//! without a filter is always searched.
//!
//! A filter is built at about one bit per two bytes of its file, then folded in halves while it
//! stays under [`FOLD_BELOW`] full (a power of two, at least 1,024 bits): its size follows the
//! trigrams its file holds, not its bytes, so a repetitive file costs little. With one hash, a
//! trigram the file lacks is then taken as present with odds of about one half, so a name of
//! 12 letters (10 trigrams) lets through about one file in a thousand that lacks it. A binary
//! file (one with a NUL byte, which every grep skips) keeps a filter of no bits that matches
//! nothing, so a repeated search never reads it again. Filters count against the search
//! cache's bytes, and stop being built when it is full.

use std::io::Read;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use super::listed::Listed;
use super::stamp::Stamp;
use crate::provider::Root;
use crate::provider::searched::is_binary;

/// Threads that build a listing's filters after its first search: two, so a 100,000-file tree
/// is filtered in about the time of one search of it, and the other cores stay the sessions'.
const BUILD_THREADS: usize = 2;

/// Smallest filter, in 64-bit words.
const MIN_WORDS: usize = 16;
/// Largest filter, in 64-bit words (1 Mbit: a 2 MiB file fills it as densely as the rest).
const MAX_WORDS: usize = 1 << 14;

/// A filter is folded while less than this share of its bits is set (after a fold, about
/// twice as many are).
const FOLD_BELOW: f64 = 0.35;

/// The trigrams of one file (no bits: a binary file, which no search matches), and the digest
/// of the stamp of the bytes it was built from (see [`Stamp::digest`]; 0: none to trust), which
/// the search index keeps it by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GramFilter {
    /// The stamp's digest, then the bits.
    data: Box<[u64]>,
}

/// Folds a byte for the filter: ASCII letters lose their case (so do a few punctuation pairs,
/// such as `@` and `` ` ``: the filter only grows less exact). The same fold is applied to
/// the file and to the literal, so a case-insensitive search is filtered too.
fn fold(byte: u8) -> u32 {
    u32::from(byte | 0x20)
}

/// Bit of a folded trigram in a filter of `2^shift` bits.
fn bit(gram: u32, shift: u32) -> usize {
    (hash(gram) >> (64 - shift)) as usize
}

/// Fibonacci hashing: the top bits of a multiplication spread neighbouring trigrams.
fn hash(gram: u32) -> u64 {
    u64::from(gram).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// A literal's trigrams, each [`hash`]ed once: what is left per filter is a shift (a grep of a
/// rare name weighs 100,000 filters).
struct Hashed(Vec<u64>);

impl Hashed {
    fn of(literal: &[u8]) -> Self {
        let mut hashes = Vec::new();
        trigrams(literal, |gram| hashes.push(hash(gram)));
        hashes.sort_unstable();
        hashes.dedup();
        Self(hashes)
    }
}

/// `words` in half: bit `i` of the result is set when bit `2i` or `2i + 1` was, which is where
/// [`bit`] puts a trigram in a filter of half the bits (its top bits, one fewer).
fn halve(words: &[u64]) -> Vec<u64> {
    /// The even bits of `x` (each the OR of a pair), packed into its low 32 bits.
    fn pack(x: u64) -> u64 {
        let mut x = (x | x >> 1) & 0x5555_5555_5555_5555;
        x = (x | x >> 1) & 0x3333_3333_3333_3333;
        x = (x | x >> 2) & 0x0F0F_0F0F_0F0F_0F0F;
        x = (x | x >> 4) & 0x00FF_00FF_00FF_00FF;
        x = (x | x >> 8) & 0x0000_FFFF_0000_FFFF;
        (x | x >> 16) & 0x0000_0000_FFFF_FFFF
    }
    words.chunks_exact(2).map(|pair| pack(pair[0]) | pack(pair[1]) << 32).collect()
}

/// Calls `each` with the folded trigram ending at every byte from the third on whose three
/// bytes are all letters, `_` or spaces (see [`word_byte`]).
fn trigrams(bytes: &[u8], mut each: impl FnMut(u32)) {
    let mut gram = 0u32;
    // How many of the last bytes were letters, `_` or spaces.
    let mut run = 0u32;
    for &byte in bytes {
        let folded = fold(byte);
        gram = (gram << 8 | folded) & 0xFF_FFFF;
        run = if word_byte(folded) { run + 1 } else { 0 };
        if run >= 3 {
            each(gram);
        }
    }
}

/// Whether a folded byte is a letter, `_` (which folds to DEL, which joins it) or a space: only
/// trigrams of three such bytes are kept, in the file and in the literal alike. Names, and names
/// joined by a space (`fn poll_ready`, `def __init__`, `class Foo`), are what agents grep for;
/// the trigrams with digits, punctuation or line ends in them were most of a file's (so most of
/// its filter) while a literal's other trigrams still rule out nearly every file without it. A
/// literal with no three such bytes in a row filters nothing.
fn word_byte(folded: u32) -> bool {
    matches!(folded, 0x20 | 0x61..=0x7A | 0x7F)
}

impl GramFilter {
    /// The filter of `bytes`: one that matches nothing when they hold a NUL byte (a search
    /// skips such a file as binary).
    pub fn of(bytes: &[u8]) -> Self {
        if is_binary(bytes) {
            return Self { data: Box::new([0]) };
        }
        let words = (bytes.len() / 128).next_power_of_two().clamp(MIN_WORDS, MAX_WORDS);
        let shift = (words * 64).trailing_zeros();
        let mut set = vec![0u64; words];
        trigrams(bytes, |gram| {
            let i = bit(gram, shift);
            set[i / 64] |= 1 << (i % 64);
        });
        while set.len() > MIN_WORDS {
            let ones: u32 = set.iter().map(|w| w.count_ones()).sum();
            if f64::from(ones) >= FOLD_BELOW * (set.len() * 64) as f64 {
                break;
            }
            set = halve(&set);
        }
        let mut data = Vec::with_capacity(set.len() + 1);
        data.push(0);
        data.extend_from_slice(&set);
        Self { data: data.into_boxed_slice() }
    }

    /// The filter of bits `bits` (as [`bits`](Self::bits) gave them) and stamp digest `stamp`;
    /// `None` when no filter has that many bits.
    pub fn from_parts(stamp: u64, bits: impl ExactSizeIterator<Item = u64>) -> Option<Self> {
        if !Self::possible_words(bits.len()) {
            return None;
        }
        Some(Self { data: std::iter::once(stamp).chain(bits).collect() })
    }

    /// Whether a filter may have `words` words of bits.
    pub fn possible_words(words: usize) -> bool {
        words == 0 || (words.is_power_of_two() && (MIN_WORDS..=MAX_WORDS).contains(&words))
    }

    /// The same filter, built from bytes whose stamp has the digest `stamp` (0: untrusted).
    pub fn stamped(mut self, stamp: u64) -> Self {
        self.data[0] = stamp;
        self
    }

    /// The digest of the stamp of the bytes it was built from; 0 when none can be trusted (the
    /// file had changed within the racy window when it was read).
    pub fn stamp(&self) -> u64 {
        self.data[0]
    }

    /// Its bits, 64 a word (none: a binary file's).
    pub fn bits(&self) -> &[u64] {
        &self.data[1..]
    }

    /// Whether this is a binary file's filter, which no search matches.
    pub fn binary(&self) -> bool {
        self.data.len() == 1
    }

    /// Whether the file may contain `literal` (always, for one shorter than three bytes, unless
    /// the file is binary).
    pub fn may_contain(&self, literal: &[u8]) -> bool {
        self.may_hold(&Hashed::of(literal))
    }

    /// [`may_contain`](Self::may_contain) for a literal hashed once for every filter.
    fn may_hold(&self, literal: &Hashed) -> bool {
        if self.binary() {
            return false;
        }
        let bits = self.bits();
        let shift = (bits.len() * 64).trailing_zeros();
        literal.0.iter().all(|&hash| {
            let i = (hash >> (64 - shift)) as usize;
            bits[i / 64] & (1 << (i % 64)) != 0
        })
    }

    /// Bytes it holds.
    pub fn bytes(&self) -> usize {
        self.data.len() * 8 + std::mem::size_of::<Self>()
    }
}

/// The bytes the search cache holds (listings and filters), and its cap.
#[derive(Default)]
pub struct CacheBytes {
    used: AtomicUsize,
    max: usize,
    /// Asked by a filter build that found the cache full to make room for the filters of the
    /// listing it names (see [`CacheBytes::on_full`]).
    room: std::sync::OnceLock<Room>,
}

/// What makes room in a full cache for the filters of the given listing: drops the filters of
/// a listing searched less recently; whether it dropped any.
pub type Room = Box<dyn Fn(&Grams) -> bool + Send + Sync>;

impl std::fmt::Debug for CacheBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CacheBytes").field("used", &self.used()).field("max", &self.max).finish()
    }
}

impl CacheBytes {
    /// Nothing held yet; at most `max`.
    pub fn new(max: usize) -> Self {
        Self { used: AtomicUsize::new(0), max, room: std::sync::OnceLock::new() }
    }

    /// Sets what a build that finds the cache full asks to make room (once).
    pub fn on_full(&self, room: Room) {
        let _ = self.room.set(room);
    }

    /// Asks for room for `grams`' filters; whether some was made.
    fn make_room(&self, grams: &Grams) -> bool {
        self.room.get().is_some_and(|room| room(grams))
    }

    /// Takes `bytes` when they fit.
    pub fn reserve(&self, bytes: usize) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes).filter(|&total| total <= self.max)
            })
            .is_ok()
    }

    /// Gives back `bytes`.
    pub fn release(&self, bytes: usize) {
        self.used.fetch_sub(bytes, Ordering::AcqRel);
    }

    /// Bytes held.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }

    /// The cap.
    pub fn max(&self) -> usize {
        self.max
    }
}

/// Set while filters are being built (one listing's at a time).
static BUILDING: AtomicBool = AtomicBool::new(false);

/// Whether filters are being built now (`daemon/status`: a repeated search meanwhile reads the
/// files still without one).
pub fn building() -> bool {
    BUILDING.load(Ordering::Acquire)
}

/// Why a filter was not kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterRefused {
    /// The file changed meanwhile (or already has one).
    Changed,
    /// The search cache is full.
    Full,
    /// The listing was dropped.
    Gone,
}

/// The filters of one listing's files, by position in the listing.
pub struct Grams {
    filters: RwLock<Vec<Option<GramFilter>>>,
    /// Files of the listing: every answer about them has this many entries, retired or not.
    files: usize,
    /// Bumped by every reported change of a listed file: a filter built from bytes read
    /// before a bump is not kept.
    generation: AtomicU64,
    bytes: AtomicUsize,
    /// Set when the listing is dropped: nothing more is kept, its bytes are given back.
    retired: AtomicBool,
    /// Set when a build went through every file.
    complete: AtomicBool,
    cache: Arc<CacheBytes>,
    /// Told when a build went through every file (the search index is written then).
    built: std::sync::OnceLock<Built>,
}

/// What a listing's filters tell when a build of them went through every file.
pub type Built = Arc<dyn Fn() + Send + Sync>;

impl std::fmt::Debug for Grams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grams").field("files", &self.files).field("bytes", &self.bytes()).finish()
    }
}

impl Grams {
    /// No filters yet for a listing of `files` files, their bytes taken from `cache`.
    pub fn new(files: usize, cache: Arc<CacheBytes>) -> Self {
        Self {
            filters: RwLock::new(vec![None; files]),
            files,
            generation: AtomicU64::new(0),
            bytes: AtomicUsize::new(0),
            retired: AtomicBool::new(false),
            complete: AtomicBool::new(false),
            cache,
            built: std::sync::OnceLock::new(),
        }
    }

    /// Sets what is told when a build goes through every file (once).
    pub fn on_built(&self, built: Built) {
        let _ = self.built.set(built);
    }

    /// Puts in `filters` (one slot per file; a validation found them true of their files),
    /// unless a change was reported since `generation` or the listing was dropped (then none:
    /// the files are read, and their filters built again); those that do not fit the cache are
    /// left out. Whether they were put in.
    pub fn install(&self, filters: Vec<Option<GramFilter>>, generation: u64) -> bool {
        let mut slots = self.filters.write().unwrap_or_else(PoisonError::into_inner);
        if self.retired.load(Ordering::Acquire)
            || self.generation.load(Ordering::Acquire) != generation
            || filters.len() != slots.len()
        {
            return false;
        }
        for (slot, filter) in slots.iter_mut().zip(filters) {
            let Some(filter) = filter.filter(|_| slot.is_none()) else { continue };
            if !self.cache.reserve(filter.bytes()) {
                break;
            }
            self.bytes.fetch_add(filter.bytes(), Ordering::Relaxed);
            *slot = Some(filter);
        }
        true
    }

    /// Calls `read` with the filters, one slot per file, under the read lock (writers wait);
    /// `None` once the listing is dropped.
    pub fn read_filters<R>(&self, read: impl FnOnce(&[Option<GramFilter>]) -> R) -> Option<R> {
        let filters = self.filters.read().unwrap_or_else(PoisonError::into_inner);
        (filters.len() == self.files && !self.retired.load(Ordering::Acquire)).then(|| read(&filters))
    }

    /// The filters of the listing's files after some came and went: file `i` of the new
    /// listing takes the filter of file `from[i]` of this one (none for a new file). This one is
    /// retired (a search still holding it reads every file; a build of it stops); the filters
    /// moved keep their bytes, those of the files gone give theirs back.
    pub fn remapped(&self, from: &[Option<usize>]) -> Self {
        let mut old = self.filters.write().unwrap_or_else(PoisonError::into_inner);
        self.retired.store(true, Ordering::Release);
        let mut moved = 0;
        let filters: Vec<Option<GramFilter>> = from
            .iter()
            .map(|&index| {
                let filter = index.and_then(|index| old.get_mut(index)?.take());
                moved += filter.as_ref().map_or(0, GramFilter::bytes);
                filter
            })
            .collect();
        old.clear();
        old.shrink_to_fit();
        self.cache.release(self.bytes.swap(0, Ordering::AcqRel).saturating_sub(moved));
        Self {
            filters: RwLock::new(filters),
            files: from.len(),
            generation: AtomicU64::new(0),
            bytes: AtomicUsize::new(moved),
            retired: AtomicBool::new(false),
            complete: AtomicBool::new(false),
            cache: Arc::clone(&self.cache),
            built: self.built.get().cloned().map(std::sync::OnceLock::from).unwrap_or_default(),
        }
    }

    /// The listing is dropped: the filters go and their bytes are given back.
    pub fn retire(&self) {
        let mut filters = self.filters.write().unwrap_or_else(PoisonError::into_inner);
        self.retired.store(true, Ordering::Release);
        filters.clear();
        filters.shrink_to_fit();
        self.cache.release(self.bytes.swap(0, Ordering::AcqRel));
    }

    /// Drops every filter (the cache needs room for a listing searched more recently): the
    /// listing's searches read every file again until a build fills them anew, and a build
    /// under way keeps nothing it read before. Returns the bytes given back.
    pub fn drop_filters(&self) -> usize {
        let mut filters = self.filters.write().unwrap_or_else(PoisonError::into_inner);
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.complete.store(false, Ordering::Release);
        filters.iter_mut().for_each(|filter| *filter = None);
        let bytes = self.bytes.swap(0, Ordering::AcqRel);
        self.cache.release(bytes);
        bytes
    }

    /// The generation to hand back to [`keep`](Self::keep) (take it before reading the file).
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Keeps the filter of file `index`, built from bytes read since `generation`, when no
    /// change was reported meanwhile and the cache has room.
    pub fn keep(&self, index: usize, filter: GramFilter, generation: u64) -> Result<usize, FilterRefused> {
        let mut filters = self.filters.write().unwrap_or_else(PoisonError::into_inner);
        let bytes = filter.bytes();
        if self.retired.load(Ordering::Acquire) {
            return Err(FilterRefused::Gone);
        }
        if self.generation.load(Ordering::Acquire) != generation
            || filters.get(index).is_none_or(Option::is_some)
        {
            return Err(FilterRefused::Changed);
        }
        if !self.cache.reserve(bytes) {
            return Err(FilterRefused::Full);
        }
        filters[index] = Some(filter);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        Ok(bytes)
    }

    /// Builds the filters still missing, on a thread of its own, unless a build (of any
    /// listing) is running: files are read beneath `root` (at most `whole_max` bytes each;
    /// bigger ones get none and are always searched). It ends early when the listing is
    /// dropped or the cache is full. A search never waits for it.
    pub fn fill(self: &Arc<Self>, root: &Root, listed: &Arc<Vec<Listed>>, whole_max: u64) {
        if self.complete.load(Ordering::Acquire) || BUILDING.swap(true, Ordering::AcqRel) {
            return;
        }
        let (grams, root, listed) = (Arc::clone(self), root.clone(), Arc::clone(listed));
        let spawned = std::thread::Builder::new().name("filectx-grams".into()).spawn(move || {
            grams.build(&root, &listed, whole_max);
            BUILDING.store(false, Ordering::Release);
        });
        if spawned.is_err() {
            BUILDING.store(false, Ordering::Release);
        }
    }

    /// Builds the missing filters on [`BUILD_THREADS`] threads sharing the files in order.
    fn build(&self, root: &Root, listed: &[Listed], whole_max: u64) {
        // Found under one hold of the lock: after a few files came, a few are missing of many.
        let missing: Vec<usize> = {
            let filters = self.filters.read().unwrap_or_else(PoisonError::into_inner);
            filters
                .iter()
                .enumerate()
                .filter(|(_, filter)| filter.is_none())
                .map(|(index, _)| index)
                .collect()
        };
        let next = AtomicUsize::new(0);
        let ended = AtomicBool::new(false);
        let kept = AtomicBool::new(false);
        let work = || {
            let mut bytes = Vec::new();
            while !ended.load(Ordering::Relaxed) {
                let Some(&index) = missing.get(next.fetch_add(1, Ordering::Relaxed)) else { return };
                let Some(file) = listed.get(index) else { return };
                if self.has(index) {
                    continue;
                }
                let generation = self.generation();
                bytes.clear();
                let mut stamp = 0;
                // Dated from the descriptor read (a glob's walk left most files undated); too
                // big a file gets no filter. The start first: a binary file gets its filter
                // without the rest being read. The filter keeps the stamp of what was read,
                // when it can be trusted (the search index keeps it by that).
                let read = root.open_read(&file.rel).and_then(|mut f| {
                    let meta = f.metadata()?;
                    let seen = Stamp::of_meta(&meta);
                    if seen.settled(super::stamp::now()) {
                        stamp = seen.digest();
                    }
                    file.date(super::listed::mtime_of(&meta));
                    if meta.len() > whole_max {
                        return Err(std::io::ErrorKind::FileTooLarge.into());
                    }
                    let peek = crate::provider::searched::BINARY_PEEK.min(whole_max + 1);
                    (&mut f).take(peek).read_to_end(&mut bytes)?;
                    if !is_binary(&bytes) {
                        f.take((whole_max + 1).saturating_sub(bytes.len() as u64)).read_to_end(&mut bytes)?;
                    }
                    Ok(())
                });
                if read.is_err() || bytes.len() as u64 > whole_max {
                    continue;
                }
                let filter = GramFilter::of(&bytes).stamped(stamp);
                if self.cache.used() + filter.bytes() > self.cache.max() {
                    // Full: the filters of a listing searched less recently make room, if any.
                    self.cache.make_room(self);
                }
                match self.keep(index, filter, generation) {
                    Ok(_) => kept.store(true, Ordering::Relaxed),
                    Err(FilterRefused::Changed) => {}
                    Err(FilterRefused::Gone | FilterRefused::Full) => ended.store(true, Ordering::Relaxed),
                }
            }
        };
        std::thread::scope(|scope| {
            for _ in 1..BUILD_THREADS {
                scope.spawn(work);
            }
            work();
        });
        if !ended.load(Ordering::Relaxed) {
            self.complete.store(true, Ordering::Release);
            if let Some(built) = self.built.get().filter(|_| kept.load(Ordering::Relaxed)) {
                built();
            }
        }
    }

    /// File `index` changed: its filter goes, and filters being built now are not kept.
    pub fn forget(&self, index: usize) {
        let mut filters = self.filters.write().unwrap_or_else(PoisonError::into_inner);
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.complete.store(false, Ordering::Release);
        if let Some(filter) = filters.get_mut(index).and_then(Option::take) {
            self.bytes.fetch_sub(filter.bytes(), Ordering::Relaxed);
            self.cache.release(filter.bytes());
        }
    }

    /// Whether a build went through every file since the last change.
    pub fn is_complete(&self) -> bool {
        self.complete.load(Ordering::Acquire)
    }

    /// Bytes the filters hold.
    pub fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// For each file, whether a search for `needles` must read it: no filter, or its filter
    /// may contain, for every group of `needles`, one of the group's literals. Always one
    /// entry per file of the listing: once the listing is dropped (its filters retired while a
    /// search still holds it), every file must be read.
    pub fn must_read(&self, needles: &[Vec<Vec<u8>>]) -> Vec<bool> {
        let filters = self.filters.read().unwrap_or_else(PoisonError::into_inner);
        if filters.len() != self.files {
            return vec![true; self.files];
        }
        let groups: Vec<Vec<Hashed>> =
            needles.iter().map(|group| group.iter().map(|literal| Hashed::of(literal)).collect()).collect();
        filters
            .iter()
            .map(|filter| {
                filter.as_ref().is_none_or(|f| {
                    !f.binary() && groups.iter().all(|group| group.iter().any(|literal| f.may_hold(literal)))
                })
            })
            .collect()
    }

    /// Whether file `index` has a filter.
    pub fn has(&self, index: usize) -> bool {
        self.filters.read().unwrap_or_else(PoisonError::into_inner).get(index).is_some_and(Option::is_some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Never "no" wrongly: every slice of a text (no NUL byte: a binary file's filter
        /// matches nothing, as a search skips it), in any ASCII case, may be contained, however
        /// the filter was folded.
        #[test]
        fn a_filter_never_denies_what_the_file_holds(
            bytes in proptest::collection::vec(1u8.., 0..4000),
            start in 0usize..4000,
            len in 3usize..40,
        ) {
            let filter = GramFilter::of(&bytes);
            if start + len <= bytes.len() {
                let slice = &bytes[start..start + len];
                prop_assert!(filter.may_contain(slice));
                prop_assert!(filter.may_contain(&slice.to_ascii_uppercase()));
            }
        }
    }

    proptest! {
        /// The same for a text of few distinct trigrams, whose filter is folded small.
        #[test]
        fn a_folded_filter_never_denies_what_the_file_holds(
            picks in proptest::collection::vec(0usize..6, 0..8_000),
            start in 0usize..8_000,
            len in 3usize..40,
        ) {
            let bytes: Vec<u8> = picks.iter().map(|&i| b"ab_c(\n"[i]).collect();
            let filter = GramFilter::of(&bytes);
            if start + len <= bytes.len() {
                prop_assert!(filter.may_contain(&bytes[start..start + len]));
            }
        }

        /// Folding loses nothing: every trigram of the bytes is still in the folded filter.
        #[test]
        fn a_folded_filter_still_holds_every_trigram(words in proptest::collection::vec(any::<u64>(), 16..64)) {
            let words: Vec<u64> = words[..words.len().next_power_of_two() / 2].to_vec();
            let folded = halve(&words);
            prop_assert_eq!(folded.len(), words.len() / 2);
            for i in 0..words.len() * 64 {
                if words[i / 64] & (1 << (i % 64)) != 0 {
                    prop_assert!(folded[i / 128] & (1 << ((i / 2) % 64)) != 0, "bit {} lost", i);
                }
            }
        }
    }

    #[test]
    fn a_repetitive_file_gets_a_small_filter_and_a_binary_one_none() {
        let text = "let value = self.cache.get(key)?;\n".repeat(3000);
        let filter = GramFilter::of(text.as_bytes());
        assert_eq!(filter.bits().len(), MIN_WORDS, "100 KB of one line folds to the smallest filter");
        assert!(filter.may_contain(b"self.cache.get") && !filter.may_contain(b"poll_ready"));
        let binary = GramFilter::of(b"ELF\0\x01poll_ready");
        assert!(binary.binary() && !binary.may_contain(b"poll_ready") && !binary.may_contain(b"p"));
        assert!(binary.bytes() < 32);
        let grams = Grams::new(2, Arc::new(CacheBytes::new(1 << 20)));
        assert!(grams.keep(0, binary, grams.generation()).is_ok());
        assert_eq!(grams.must_read(&[]), [false, true], "a binary file is skipped even without literals");
    }

    #[test]
    fn a_filter_rejects_most_literals_a_file_lacks() {
        let text: String = (0..2000).map(|i| format!("fn item_{i}(x: u32) -> u32 {{ x + {i} }}\n")).collect();
        let filter = GramFilter::of(text.as_bytes());
        assert!(filter.may_contain(b"fn item_1999"));
        let absent = ["poll_ready", "impl Future", "unreachable!", "#[derive(Debug)]", "async move"];
        assert!(absent.iter().all(|l| !filter.may_contain(l.as_bytes())), "a dense file still filters");
    }

    #[test]
    fn kept_filters_respect_changes_and_the_reservation() {
        let small = Grams::new(2, Arc::new(CacheBytes::new(16)));
        assert_eq!(small.keep(0, GramFilter::of(b"abcdef"), small.generation()), Err(FilterRefused::Full));
        let cache = Arc::new(CacheBytes::new(1 << 20));
        let grams = Grams::new(2, Arc::clone(&cache));
        let generation = grams.generation();
        grams.forget(1);
        assert_eq!(grams.keep(0, GramFilter::of(b"abcdef"), generation), Err(FilterRefused::Changed));
        let generation = grams.generation();
        assert!(grams.keep(0, GramFilter::of(b"abcdef"), generation).is_ok());
        assert_eq!(cache.used(), grams.bytes());
        assert_eq!(grams.must_read(&[vec![b"xyz".to_vec()]]), [false, true]);
        assert_eq!(grams.must_read(&[vec![b"xyz".to_vec(), b"BCD".to_vec()]]), [true, true]);
        grams.forget(0);
        assert_eq!((grams.bytes(), cache.used()), (0, 0));
        assert_eq!(grams.must_read(&[vec![b"xyz".to_vec()]]), [true, true]);
        assert!(grams.keep(1, GramFilter::of(b"abcdef"), grams.generation()).is_ok());
        grams.retire();
        assert_eq!(cache.used(), 0, "a dropped listing gives its filters' bytes back");
        assert_eq!(grams.must_read(&[vec![b"xyz".to_vec()]]), [true, true], "retired: every file is read");
        assert_eq!(grams.keep(0, GramFilter::of(b"abcdef"), grams.generation()), Err(FilterRefused::Gone));
    }

    #[test]
    fn remapped_filters_follow_their_files_and_their_bytes() {
        let cache = Arc::new(CacheBytes::new(1 << 20));
        let grams = Grams::new(3, Arc::clone(&cache));
        for (index, text) in [b"alpha beta", b"gamma delt", b"omega zeta"].iter().enumerate() {
            assert!(grams.keep(index, GramFilter::of(*text), grams.generation()).is_ok());
        }
        let third = grams.filters.read().unwrap()[2].as_ref().unwrap().bytes();
        // File 1 went, a new one came first: [new, old 0, old 2].
        let moved = grams.remapped(&[None, Some(0), Some(2)]);
        assert_eq!(grams.keep(1, GramFilter::of(b"late"), grams.generation()), Err(FilterRefused::Gone));
        assert_eq!(grams.must_read(&[vec![b"gamma".to_vec()]]), [true; 3], "the old one reads all");
        assert_eq!(moved.must_read(&[vec![b"omega".to_vec()]]), [true, false, true]);
        assert_eq!(moved.must_read(&[vec![b"alpha".to_vec()]]), [true, true, false]);
        assert_eq!(cache.used(), moved.bytes(), "the gone file's filter gave its bytes back");
        assert!(moved.bytes() > third && !moved.is_complete() && !moved.has(0));
        moved.retire();
        assert_eq!(cache.used(), 0);
    }
}
