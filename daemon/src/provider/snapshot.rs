//! `Snapshot`: one pinned version of a text file, and windows cut from it (checked against
//! the fingerprint and a torn mapping after copying).

use std::fs::File;
use std::io::ErrorKind;
use std::sync::Arc;

use super::entry::{Body, CacheEntry};
use super::index::{self, LineIndex, NotText, Window, WindowRequest};
use super::{Fingerprint, Version};

/// One version of a text file, pinned for reading windows from it: its index, an open file
/// (which keeps the inode), and where its bytes come from.
#[derive(Debug)]
pub struct Snapshot {
    /// The version every window of this snapshot belongs to.
    pub version: Version,
    /// Hard links the file had when it was opened.
    pub links: u64,
    index: Arc<LineIndex>,
    fingerprint: Fingerprint,
    file: Arc<File>,
    body: Body,
}

/// A snapshot's file changed (or its mapping was torn) while a window was being cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Changed;

impl Snapshot {
    /// Pins `entry`'s version for reading windows from `body` through `file` (which has
    /// `links` hard links); fails when the version is not text.
    pub(super) fn pin(entry: &CacheEntry, file: Arc<File>, links: u64, body: Body) -> Result<Self, NotText> {
        let index = entry.text.as_ref().map_err(|why| *why)?.clone();
        Ok(Self { version: entry.version, links, index, fingerprint: entry.fingerprint, file, body })
    }

    /// Lines in the file.
    pub fn total_lines(&self) -> u64 {
        self.index.total_lines()
    }

    /// Cuts the window `request` asks for out of this version (see [`index::window`]), or
    /// reports that the file changed under it (the window is then discarded, never returned).
    pub fn window(&self, request: &WindowRequest) -> Result<Window, WindowError> {
        let window = self.window_unverified(request)?;
        if !matches!(self.body, Body::Memory(_)) && !self.unchanged() {
            return Err(WindowError::Changed(Changed));
        }
        Ok(window)
    }

    /// [`Snapshot::window`] without its last check, that the file still has the snapshot's
    /// fingerprint after the window was read (a torn mapping is still noticed): for a caller
    /// that makes that check itself afterwards, on a handle to the same inode.
    pub(super) fn window_unverified(&self, request: &WindowRequest) -> Result<Window, WindowError> {
        let window = match &self.body {
            Body::Memory(bytes) => index::window(bytes.as_slice(), &self.index, request),
            Body::Stored(bytes) => index::window(&bytes[..], &self.index, request),
            Body::Mapped(mapped) => index::window(mapped.bytes(), &self.index, request),
            Body::File => index::window(&*self.file, &self.index, request),
        };
        let window = match window {
            Ok(window) => window,
            Err(e) if matches!(e.kind(), ErrorKind::UnexpectedEof | ErrorKind::InvalidData) => {
                return Err(WindowError::Changed(Changed));
            }
            Err(e) => return Err(WindowError::Io(e)),
        };
        if let Body::Mapped(mapped) = &self.body
            && mapped.torn()
        {
            return Err(WindowError::Changed(Changed));
        }
        Ok(window)
    }

    /// The version's bytes, when this snapshot holds them in memory (a file just read whole).
    pub(super) fn into_bytes(self) -> Option<Vec<u8>> {
        match self.body {
            Body::Memory(bytes) => Some(bytes),
            Body::Mapped(_) | Body::Stored(_) | Body::File => None,
        }
    }

    /// Whether the open file still has the fingerprint this snapshot was taken at.
    fn unchanged(&self) -> bool {
        self.file.metadata().map(|m| Fingerprint::of(&m) == self.fingerprint).unwrap_or(false)
    }
}

/// Why a window could not be cut from a snapshot.
#[derive(Debug)]
pub enum WindowError {
    /// The file changed under the snapshot.
    Changed(Changed),
    /// Reading failed.
    Io(std::io::Error),
}
