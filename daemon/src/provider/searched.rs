//! Opening a file for a search: beneath its root's handle, so that a symlink met anywhere on the
//! way is refused, never followed; small files read whole (hashed when the search may count as
//! a read), bigger ones handed back as the open file.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::Ordering;

use super::beneath::RootDir;
use super::error::io_error;
use super::{Fingerprint, Provider, ProviderError, Version};

/// A file opened for a search.
#[derive(Debug)]
pub enum SearchContents {
    /// Small enough to hold: its bytes, and what identifies the version searched.
    Whole {
        /// The file's bytes.
        bytes: Vec<u8>,
        /// Its version and fingerprint when read.
        seen: SearchSeen,
    },
    /// Small enough to hold, read without hashing (a search that records nothing); its first
    /// [`BINARY_PEEK`] bytes hold no NUL (a search needs to look through the rest only).
    Bytes(Vec<u8>),
    /// Binary: a NUL byte in its first [`BINARY_PEEK`] bytes, the rest unread (a search that
    /// records nothing skips it).
    Binary,
    /// Too big to hold: searched from the open file, never recorded.
    Stream(File),
}

/// What a whole read of a searched file saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SearchSeen {
    /// blake3 of the bytes read.
    pub version: Version,
    /// The open file's fingerprint.
    pub fingerprint: Fingerprint,
    /// Its hard links.
    pub links: u64,
}

/// How much of a file's start is read first, to find it binary (a NUL byte) before reading
/// the rest: ripgrep's first buffer is as big.
pub const BINARY_PEEK: u64 = 64 << 10;

/// The byte that makes a file binary to a search, as to ripgrep: a NUL. A searcher that looks
/// through a stream quits at it (`BinaryDetection::quit(BINARY_BYTE)`).
pub const BINARY_BYTE: u8 = 0;

/// Whether `bytes` hold a [`BINARY_BYTE`]: the one test a search makes of a binary file.
pub fn is_binary(bytes: &[u8]) -> bool {
    memchr::memchr(BINARY_BYTE, bytes).is_some()
}

impl Provider {
    /// Opens the listed file `rel` for reading beneath `root` (a symlink met anywhere on the
    /// way is refused): whole when it holds at most `whole_max` bytes (with `hash`, hashed,
    /// with its fingerprint: [`SearchContents::Whole`]; else [`SearchContents::Bytes`]), else as an open
    /// file. `shown` names it in errors.
    pub fn open_listed(
        &self,
        root: &RootDir,
        rel: &Path,
        whole_max: u64,
        hash: bool,
        shown: &str,
    ) -> Result<SearchContents, ProviderError> {
        let mut file = root.open_read(rel).map_err(|e| io_error(shown, "open", e))?;
        let meta = file.metadata().map_err(|e| io_error(shown, "stat", e))?;
        if !meta.is_file() {
            return Err(ProviderError::NotRegularFile { path: shown.to_owned() });
        }
        if !root.admits(&meta) {
            return Err(ProviderError::Private { path: shown.to_owned() });
        }
        if meta.len() > whole_max {
            return Ok(SearchContents::Stream(file));
        }
        let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
        // Its start first: a file with a NUL byte there is binary, which a search that records
        // nothing skips, so the rest of it (a library of megabytes) is never read.
        let peek = BINARY_PEEK.min(whole_max + 1);
        (&mut file).take(peek).read_to_end(&mut bytes).map_err(|e| io_error(shown, "read", e))?;
        if !hash && is_binary(&bytes) {
            return Ok(SearchContents::Binary);
        }
        // A start shorter than asked for ended at the end of the file: nothing more to read
        // (most files; one read call fewer each).
        if bytes.len() as u64 >= peek {
            let rest = (whole_max + 1).saturating_sub(bytes.len() as u64);
            (&mut file).take(rest).read_to_end(&mut bytes).map_err(|e| io_error(shown, "read", e))?;
        }
        if bytes.len() as u64 > whole_max {
            // It grew meanwhile: search it as a stream from the start.
            file.seek(SeekFrom::Start(0)).map_err(|e| io_error(shown, "seek", e))?;
            return Ok(SearchContents::Stream(file));
        }
        if !hash {
            return Ok(SearchContents::Bytes(bytes));
        }
        let after = file.metadata().map_err(|e| io_error(shown, "stat", e))?;
        self.hashed.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        let seen = SearchSeen {
            version: Version::of(&bytes),
            fingerprint: Fingerprint::of(&meta),
            links: after.nlink(),
        };
        if Fingerprint::of(&after) != seen.fingerprint {
            // Changed while read: search it, but nothing ties these bytes to one version.
            file.seek(SeekFrom::Start(0)).map_err(|e| io_error(shown, "seek", e))?;
            return Ok(SearchContents::Stream(file));
        }
        Ok(SearchContents::Whole { bytes, seen })
    }

    /// Whether the file at `rel` beneath `root` still has `fingerprint` (same inode, size and
    /// times): nothing replaced or changed it since it was read.
    pub fn unchanged(&self, root: &RootDir, rel: &Path, fingerprint: &Fingerprint) -> bool {
        root.open_path(rel).and_then(|f| f.metadata()).is_ok_and(|m| Fingerprint::of(&m) == *fingerprint)
    }

    /// Whether `rel` beneath `root` is a regular file reached through no symlink.
    pub fn is_listed_file(&self, root: &RootDir, rel: &Path) -> bool {
        root.open_path(rel).and_then(|f| f.metadata()).is_ok_and(|m| m.is_file())
    }
}
