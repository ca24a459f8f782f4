//! The in-place rewrite of a file with several hard links (so that all its names stay one
//! file), made so that the file ends with its old or its new content, never a mix: under a full
//! disk, a quota, any failure of the write, and a kill.
//!
//! Under the write's locks: the old content is first copied aside into a private file next to
//! the target (created like a staging file, see [`leftovers`](super::leftovers), named
//! `….old`), whose header says which file it belongs to (device, inode, name) and which
//! versions (the old and the new content's length and hash); it is synced (with the folder)
//! before the target is touched. A disk too full for that copy refuses the write before
//! anything changed. Then the new length is reserved (`fallocate`, keeping the size), so that a
//! full disk or a quota refuses it before a byte of the file changes; the new content is
//! written over the old, the length set, the file synced, and the copy removed. Any failure on
//! the way puts the old content back from the copy. A daemon killed on the way leaves the copy:
//! the next daemon's first look at that folder ([`recover`](super::copy::recover)) finds it,
//! and puts the old content back when the file holds neither version (and is no longer than
//! the longer of the two).

use std::ffi::OsStr;
use std::fs::File;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;

use rustix::fs::{AtFlags, FallocateFlags, Mode, OFlags};

use super::copy::{HEADER_BYTES, Header, each_chunk, put_back};
use super::crash::crash_point;
use super::error::io_error;
use super::leftovers::Made;
use super::lock::LockedFile;
use super::outcome::Landed;
use super::{Provider, ProviderError, Resolved, Version};

/// Frees what was reserved past the file's end `end` and not written (`fallocate` keeping the
/// size leaves it allocated beyond the end until the file is cut); best effort.
fn give_back(file: &File, end: u64) {
    let punch = FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE;
    let past = (i64::MAX as u64).saturating_sub(end);
    if past > 0 {
        let _ = rustix::fs::fallocate(file, punch, end, past);
    }
}

/// Whether an errno from `fallocate` only says the filesystem cannot reserve (the copy
/// still makes the write safe), rather than that there is no room.
fn cannot_reserve(errno: rustix::io::Errno) -> bool {
    use rustix::io::Errno;
    matches!(errno, Errno::OPNOTSUPP | Errno::NOSYS | Errno::INVAL)
}

/// A copy of the old content, made and synced, removed when dropped unless kept.
struct Copy<'d> {
    dir: &'d OwnedFd,
    name: String,
    file: File,
    old_len: u64,
    keep: bool,
}

impl Drop for Copy<'_> {
    fn drop(&mut self) {
        if !self.keep {
            let _ = rustix::fs::unlinkat(self.dir, self.name.as_str(), AtFlags::empty());
        }
    }
}

impl Provider {
    /// Rewrites the locked file (which has several hard links) in place with `bytes`; see the
    /// module's documentation. Returns where it landed (in place: no rename).
    pub(super) fn rewrite_in_place(
        &self,
        target: &Resolved,
        locked: &LockedFile,
        bytes: &[u8],
    ) -> Result<Landed, ProviderError> {
        let meta = &locked.meta;
        if meta.len() > self.config.max_edit_bytes {
            // Its old content is copied aside first: no more than a write may bring.
            return Err(ProviderError::TooLarge {
                path: target.display.clone(),
                size: meta.len(),
                limit: self.config.max_edit_bytes,
            });
        }
        // Opened beneath the root, never through a symlink, and it must be the very inode that
        // was locked and checked.
        let file = target
            .dir
            .open(&target.rel, OFlags::WRONLY | OFlags::NONBLOCK | OFlags::NOCTTY, Mode::empty())
            .map(File::from)
            .map_err(|e| io_error(&target.display, "open", e))?;
        let now = file.metadata().map_err(|e| io_error(&target.display, "stat", e))?;
        if (now.dev(), now.ino()) != (meta.dev(), meta.ino()) {
            return Err(ProviderError::Busy {
                path: target.display.clone(),
                why: "it was replaced while being written".into(),
            });
        }
        let (dir, name) = self.parent_of(target)?;
        let copy = self.copy_aside(&dir, target, locked, name, bytes)?;
        crash_point!("provider::inplace::saved");
        let new_len = bytes.len() as u64;
        let grows = new_len > copy.old_len;
        if grows {
            match reserve(&file, copy.old_len, new_len - copy.old_len) {
                Ok(()) => {}
                Err(errno) if cannot_reserve(errno) => {}
                Err(errno) => {
                    // What was reserved before it ran out (a filesystem may keep part of it).
                    give_back(&file, copy.old_len);
                    return Err(io_error(&target.display, "reserve space for", errno.into()));
                }
            }
        }
        let written = self.write_over(&file, bytes);
        if let Err(e) = written {
            return Err(self.undo(target, &file, copy, grows, e));
        }
        crash_point!("provider::inplace::synced");
        drop(copy);
        Ok(Landed { renamed: false, links: now.nlink(), fingerprint: None, version: None, entry: None })
    }

    /// Copies the locked file's content aside (see the module's documentation): written, its
    /// header last, then synced with its folder.
    fn copy_aside<'d>(
        &self,
        dir: &'d OwnedFd,
        target: &Resolved,
        locked: &LockedFile,
        name: &OsStr,
        bytes: &[u8],
    ) -> Result<Copy<'d>, ProviderError> {
        let dir_path = target.path.parent().unwrap_or(Path::new("/"));
        let (copy_name, file) = self
            .leftovers
            .create_made(dir, &name.to_string_lossy(), Made::Copy, &|temp| {
                self.own.stage(dir_path.join(temp))
            })
            .map_err(|e| io_error(&target.display, "create a copy of the old content of", e))?;
        let mut copy = Copy { dir, name: copy_name, file, old_len: 0, keep: false };
        let made = (|| -> std::io::Result<()> {
            let mut hasher = blake3::Hasher::new();
            let limit = self.config.max_edit_bytes;
            copy.old_len = each_chunk(&locked.file, 0, limit, &mut |chunk, at| {
                hasher.update(chunk);
                copy.file.write_all_at(chunk, HEADER_BYTES + at)
            })?;
            let header = Header {
                dev: locked.meta.dev(),
                ino: locked.meta.ino(),
                name: name.as_bytes().to_vec(),
                old_len: copy.old_len,
                old: Version::from_hash(hasher.finalize()),
                new_len: bytes.len() as u64,
                new: Version::of(bytes),
            };
            copy.file.write_all_at(&header.encode(), 0)?;
            if self.config.fsync {
                copy.file.sync_data()?;
                rustix::fs::fsync(dir)?;
            }
            Ok(())
        })();
        made.map_err(|e| io_error(&target.display, "copy aside the old content of", e))?;
        Ok(copy)
    }

    /// Writes `bytes` over the file from its start, gives it their length, and syncs it.
    fn write_over(&self, file: &File, bytes: &[u8]) -> std::io::Result<()> {
        // Two writes only when a test armed the fail points (to die or fail between).
        #[cfg(feature = "failpoints")]
        if super::crash::armed() {
            let half = bytes.len() / 2;
            file.write_all_at(&bytes[..half], 0)?;
            crash_point!("provider::inplace::half_written");
            // Tests: a full disk or a quota halfway through (`=return(EDQUOT)`).
            fail::fail_point!("provider::inplace::write", |errno| Err(super::crash::errno_named(errno)));
            file.write_all_at(&bytes[half..], half as u64)?;
        } else {
            file.write_all_at(bytes, 0)?;
        }
        #[cfg(not(feature = "failpoints"))]
        file.write_all_at(bytes, 0)?;
        crash_point!("provider::inplace::written");
        file.set_len(bytes.len() as u64)?;
        if self.config.fsync {
            file.sync_data()?;
        }
        Ok(())
    }

    /// After the in-place write failed with `failure`: puts the old content back from the copy
    /// (and gives back what was reserved); the error to answer. When even that fails, the copy
    /// is kept (a later daemon puts it back) and the answer says where it is.
    fn undo(
        &self,
        target: &Resolved,
        file: &File,
        mut copy: Copy<'_>,
        reserved: bool,
        failure: std::io::Error,
    ) -> ProviderError {
        match put_back(&copy.file, file, copy.old_len, self.config.fsync) {
            Ok(()) => {
                if reserved {
                    give_back(file, copy.old_len);
                }
                io_error(&target.display, "write", failure)
            }
            Err(again) => {
                copy.keep = true;
                tracing::error!(path = %target.path.display(), %failure, %again, copy = copy.name, "an in-place write failed and its old content could not be put back; it is kept in the copy");
                let why = format!(
                    "{failure}; the file may be left partly written, and its old content could not be put back ({again}): it is kept in {} in the same folder",
                    copy.name
                );
                ProviderError::Io {
                    path: target.display.clone(),
                    op: "write",
                    source: std::io::Error::new(failure.kind(), why),
                }
            }
        }
    }

    /// Cleans the folder of `target` of a dead daemon's leftovers, once per folder (see
    /// [`Leftovers::clean_once`](super::leftovers::Leftovers::clean_once)), before a write
    /// takes its locks or before the first read there of a file with several links: a file a
    /// killed daemon left torn is put back first. Returns whether a file was put back.
    pub(super) fn settle_folder(&self, target: &Resolved) -> bool {
        let Some(dir_path) = target.path.parent() else { return false };
        if self.leftovers.cleaned(dir_path) {
            return false;
        }
        let parent = target.rel.parent().unwrap_or(Path::new(""));
        let Ok(dir) = target.dir.open(parent, OFlags::PATH | OFlags::DIRECTORY, Mode::empty()) else {
            return false;
        };
        self.leftovers.clean_once(&dir, dir_path).restored > 0
    }
}

/// Reserves `len` bytes of `file` from `from` without changing its size (`fallocate` with
/// `FALLOC_FL_KEEP_SIZE`), so that a full disk or a quota shows before a byte changes.
fn reserve(file: &File, from: u64, len: u64) -> rustix::io::Result<()> {
    // Tests: a full disk or a quota when reserving (`=return(EDQUOT)`).
    #[cfg(feature = "failpoints")]
    fail::fail_point!("provider::inplace::reserve", |errno| {
        let errno = super::crash::errno_named(errno).raw_os_error().unwrap_or(libc::ENOSPC);
        Err(rustix::io::Errno::from_raw_os_error(errno))
    });
    rustix::fs::fallocate(file, FallocateFlags::KEEP_SIZE, from, len)
}
