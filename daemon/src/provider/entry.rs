//! What the provider's cache keeps of one file version ([`CacheEntry`]), where a snapshot of it reads
//! its bytes from ([`Body`]), and whether an open file still is the version it was
//! ([`unchanged`]): below both the cache and the snapshots, which share them.

use std::fs::File;
use std::sync::Arc;

use super::index::{LineIndex, NotText};
use super::mmap::Mapped;
use super::{Fingerprint, Version};

/// What the provider remembers about one file version.
#[derive(Debug)]
pub(super) struct CacheEntry {
    pub(super) fingerprint: Fingerprint,
    pub(super) version: Version,
    /// When hashing started (nanoseconds since the epoch), for the racy rule.
    pub(super) recorded_ns: i128,
    pub(super) text: Result<Arc<LineIndex>, NotText>,
    /// The file mapped once for this version (large files on local filesystems).
    pub(super) mapping: Option<Arc<Mapped>>,
    /// The file, kept open while the cache's budget of open files allows.
    pub(super) file: Option<Arc<File>>,
    /// Whether the file is on a local filesystem (see [`mappable`](super::mmap::mappable)).
    pub(super) local: bool,
}

impl CacheEntry {
    /// Its index's bytes, line ends included (those are only ever added while the entry is
    /// cached, under the cache's lock, and counted then: see [`add_ends`](super::cache::Cache::add_ends)).
    pub(super) fn heap_bytes(&self) -> usize {
        self.text.as_ref().map(|i| i.heap_bytes() + i.ends_bytes()).unwrap_or(0)
    }

    pub(super) fn mapped_bytes(&self) -> usize {
        self.mapping.as_ref().map(|m| m.len()).unwrap_or(0)
    }

    /// Where windows of this cached version are read from: its mapping, else the file.
    pub(super) fn body(&self) -> Body {
        match &self.mapping {
            Some(mapped) => Body::Mapped(mapped.clone()),
            None => Body::File,
        }
    }
}

/// Where a snapshot's bytes come from.
#[derive(Debug)]
pub(super) enum Body {
    /// Read whole into memory just now: consistent by construction.
    Memory(Vec<u8>),
    /// The version's bytes as the content store keeps them (by version, so they are that
    /// version's whatever the file does): whether the file still is that version is checked
    /// after the window is cut, as for a file.
    Stored(super::store::Content),
    /// The version's mapping: check `torn()` and the fingerprint after copying.
    Mapped(Arc<Mapped>),
    /// Positional reads of the open file: check the fingerprint after reading.
    File,
}

/// Whether the open file still has `fingerprint`.
pub(super) fn unchanged(file: &File, fingerprint: &Fingerprint) -> bool {
    file.metadata().map(|m| Fingerprint::of(&m) == *fingerprint).unwrap_or(false)
}
