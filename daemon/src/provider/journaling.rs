//! The provider's side of the journal: a change of an attributed target is begun in the
//! registered [`Recorder`] under the file's locks, with the bytes it replaces (read here when
//! the caller has not), before anything is moved into place, and ended once it landed or failed.

use std::fs::File;
use std::sync::Arc;

use super::error::io_error;
use super::journaled::{Change, ChangeKind, Recorder};
use super::lock::LockedFile;
use super::read::read_all_at;
use super::{Provider, ProviderError, Resolved, Version};

/// What the provider knows of the content a change replaces.
#[derive(Clone, Copy)]
pub(super) enum Old<'a> {
    /// No file there.
    Absent,
    /// Its version and bytes, already read (an edit reads them whole).
    Known(Version, &'a [u8]),
    /// The locked file: read here when the recorder keeps files of its size.
    Locked(&'a LockedFile),
}

/// A change begun in the journal, ended when it is dropped: landed only when marked so.
pub(super) struct Begun {
    recorder: Arc<dyn Recorder>,
    seq: u64,
    landed: bool,
    /// The version written (hashed once, here).
    after: Option<Version>,
}

impl Begun {
    /// The change landed: the version it wrote, and its entry's id.
    pub(super) fn landed(mut self) -> (Option<Version>, u64) {
        self.landed = true;
        (self.after, self.seq)
    }
}

impl Drop for Begun {
    fn drop(&mut self) {
        self.recorder.end(self.seq, self.landed);
    }
}

/// The bytes of `file` (of `size` bytes) and their version.
fn read_whole(target: &Resolved, file: &File, size: u64) -> Result<(Version, Vec<u8>), ProviderError> {
    let bytes = read_all_at(file, size).map_err(|e| io_error(&target.display, "read", e))?;
    Ok((Version::of(&bytes), bytes))
}

impl Provider {
    /// Registers the journal every attributed change is recorded in (once; later calls are
    /// ignored).
    pub fn set_recorder(&self, recorder: Arc<dyn Recorder>) {
        let _ = self.recorder.set(recorder);
    }

    /// Begins the journal entry of a change of `target` (under its locks, before anything is
    /// moved into place): `None` when nothing records it. `new` is what will be written
    /// (`None`: the file is removed); `locked` the file it replaces, as locked (`None`: none).
    pub(super) fn journal_begin(
        &self,
        target: &Resolved,
        kind: ChangeKind,
        old: Old<'_>,
        locked: Option<&std::fs::Metadata>,
        new: Option<&[u8]>,
    ) -> Result<Option<Begun>, ProviderError> {
        use std::os::unix::fs::MetadataExt as _;
        let (Some(recorder), Some(by)) = (self.recorder.get(), target.by.as_ref()) else {
            return Ok(None);
        };
        let max = recorder.max_file_bytes();
        let read;
        let (before, before_bytes) = match old {
            Old::Absent => (None, None),
            Old::Known(version, bytes) => (Some(version), (bytes.len() as u64 <= max).then_some(bytes)),
            Old::Locked(locked) if locked.meta.len() <= max => {
                read = read_whole(target, &locked.file, locked.meta.len())?;
                (Some(read.0), Some(&read.1[..]))
            }
            Old::Locked(locked) => (Some(self.version_of(target, &locked.file, &locked.meta)?), None),
        };
        let after = new.map(Version::of);
        let after_bytes = new.filter(|bytes| bytes.len() as u64 <= max);
        let before_links = locked.map_or(0, std::os::unix::fs::MetadataExt::nlink);
        // A file of several links is rewritten in place (it keeps them); else a new inode lands.
        let after_links = match new {
            None => 0,
            Some(_) if before_links > 1 => before_links,
            Some(_) => 1,
        };
        let change = Change {
            path: &target.path,
            by,
            kind,
            before,
            before_bytes,
            after,
            after_bytes,
            links: (before_links, after_links),
            mode: locked.map(|meta| meta.mode() & 0o7777),
        };
        let begun = recorder.begin(&change).map_err(|e| ProviderError::Io {
            path: target.display.clone(),
            op: "journal the change to",
            source: std::io::Error::new(
                e.kind(),
                format!(
                    "{e}; nothing was written: free space where the journal lives, or run filectxd \
                     with journal = false"
                ),
            ),
        })?;
        Ok(begun.map(|seq| Begun { recorder: recorder.clone(), seq, landed: false, after }))
    }
}
