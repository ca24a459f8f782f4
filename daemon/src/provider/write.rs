//! The write path: locks, the version guard, literal edits, staging beside the target and the
//! atomic replace (or the in-place rewrite of a multi-link file), folder creation.

use std::borrow::Cow;
use std::ffi::OsStr;
use std::fs::{File, Metadata};
use std::io::{ErrorKind, Write};
use std::os::fd::OwnedFd;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;

use super::beneath;
use super::crash::crash_point;
use super::edit::{self, Replacement};
use super::error::io_error;
use super::index::{self, NotText};
use super::journaled::ChangeKind;
use super::journaling::Old;
use super::lock::{self, LockError};
use super::outcome::{Expect, Landed, Pace, Paced};
use super::read::{read_all_at, regular};
use super::{
    Conventions, EditOutcome, Expectation, Fingerprint, Provider, ProviderError, Resolved, Version,
    WriteOutcome, leftovers,
};

/// An edit computed on a locked file (see [`Provider::edited`]).
pub(super) struct Edited {
    /// The file's bytes.
    pub old: Vec<u8>,
    /// Their version.
    pub base: Version,
    /// The bytes to write.
    pub out: Vec<u8>,
    /// Occurrences replaced.
    pub replacements: u64,
    /// The first edited places of the new version.
    pub regions: Vec<edit::Region>,
}

/// The largest file an edit changes right on an async worker (see [`Provider::edit_at_once`]):
/// reading, hashing, matching and writing this much takes well under a millisecond.
pub const AT_ONCE_BYTES: u64 = 256 * 1024;

/// What a fingerprint needs of `statx`.
const STATX_FINGERPRINT: rustix::fs::StatxFlags = rustix::fs::StatxFlags::BASIC_STATS;

/// A `statx` answer as a fingerprint and the hard links (`None`: it failed, or the kernel left
/// out a field the fingerprint needs).
fn stat_of(statx: rustix::io::Result<rustix::fs::Statx>) -> Option<(Fingerprint, u64)> {
    let statx = statx.ok()?;
    let needed = rustix::fs::StatxFlags::INO
        | rustix::fs::StatxFlags::SIZE
        | rustix::fs::StatxFlags::MTIME
        | rustix::fs::StatxFlags::CTIME
        | rustix::fs::StatxFlags::NLINK;
    if !rustix::fs::StatxFlags::from_bits_retain(statx.stx_mask).contains(needed) {
        return None;
    }
    Some((Fingerprint::of_statx(&statx), u64::from(statx.stx_nlink)))
}

/// Lets go of the replaced file's lock: a file a rename replaced is closed off the request's path
/// (closing its last descriptor frees it, see [`closer`](super::closer)); any other closes here.
pub(super) fn release(locked: lock::LockedFile, landed: &Landed) {
    if landed.renamed {
        locked.release_replaced();
    }
}

/// The daemon's effective user and group, asked once: a staged file whose target belongs to
/// someone else is given the target's owner.
static OWNER: std::sync::LazyLock<(u32, u32)> =
    std::sync::LazyLock::new(|| (rustix::process::geteuid().as_raw(), rustix::process::getegid().as_raw()));

impl Provider {
    pub(super) fn lock_path(&self, target: &Resolved) -> Result<lock::PathGuard<'_>, ProviderError> {
        self.locks.lock(&target.path, self.config.lock_patience).ok_or_else(|| ProviderError::Busy {
            path: target.display.clone(),
            why: format!("another request of this daemon has held it for {:?}", self.config.lock_patience),
        })
    }

    pub(super) fn lock_file(&self, target: &Resolved) -> Result<lock::LockedFile, ProviderError> {
        match lock::lock_file(&target.dir, &target.rel, self.config.lock_patience) {
            Ok(locked) => {
                regular(target, &locked.meta)?;
                Ok(locked)
            }
            Err(LockError::Busy(waited)) => Err(ProviderError::Busy {
                path: target.display.clone(),
                why: format!("another process has held its lock (flock) for {waited:?}"),
            }),
            Err(LockError::Io(e)) => Err(io_error(&target.display, "lock", e)),
            Err(LockError::Private) => Err(ProviderError::Private { path: target.display.clone() }),
        }
    }

    /// The edited file's lock: a file gone meanwhile is a stale version (an edit always
    /// expects one).
    pub(super) fn lock_edited(&self, target: &Resolved) -> Result<lock::LockedFile, ProviderError> {
        match self.lock_file(target) {
            Err(ProviderError::NotFound { why: None, .. }) => {
                Err(ProviderError::StaleVersion { path: target.display.clone(), current: None })
            }
            locked => locked,
        }
    }

    /// What a write refuses before taking any lock: content over the edit limit, or with a
    /// NUL byte (only text is written).
    pub(super) fn check_content(&self, target: &Resolved, content: &str) -> Result<(), ProviderError> {
        let size = content.len() as u64;
        if size > self.config.max_edit_bytes {
            return Err(ProviderError::TooLarge {
                path: target.display.clone(),
                size,
                limit: self.config.max_edit_bytes,
            });
        }
        if let Some(at) = edit::nul_at(content) {
            return Err(ProviderError::NulInContent { path: target.display.clone(), at });
        }
        Ok(())
    }

    /// Whether the written file exists (a regular file), looked at beneath its root under the
    /// path lock; a folder, another kind of file, or an existing file where `expect` wants none
    /// is refused.
    pub(super) fn existing(&self, target: &Resolved, expect: Expectation) -> Result<bool, ProviderError> {
        let meta = match target.dir.open_path(&target.rel).and_then(|f| f.metadata()) {
            Ok(meta) => meta,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(io_error(&target.display, "stat", e)),
        };
        if meta.is_dir() {
            return Err(ProviderError::IsDirectory { path: target.display.clone() });
        }
        if !meta.is_file() {
            return Err(ProviderError::NotRegularFile { path: target.display.clone() });
        }
        if expect.0 == Expect::Absent {
            return Err(ProviderError::AlreadyExists { path: target.display.clone() });
        }
        Ok(true)
    }

    /// Writes `content` as the whole file, if `expect` holds, atomically. Content with a NUL
    /// byte is refused (only text is written). With [`Conventions::Keep`], an existing file's
    /// BOM and CRLF endings are kept (judged on the bytes being replaced, under the locks); the
    /// outcome's version is that of the bytes actually written.
    pub fn write(
        &self,
        target: &Resolved,
        content: &str,
        expect: Expectation,
        conventions: Conventions,
    ) -> Result<WriteOutcome, ProviderError> {
        self.check_content(target, content)?;
        self.settle_folder(target);
        let _guard = self.lock_path(target)?;
        let (created, landed, written) = match self.existing(target, expect)? {
            true => {
                let locked = self.lock_file(target)?;
                if let Expect::Version(expected) = expect.0 {
                    let current = self.version_of(target, &locked.file, &locked.meta)?;
                    if current != expected {
                        return Err(ProviderError::StaleVersion {
                            path: target.display.clone(),
                            current: Some(current),
                        });
                    }
                }
                let bytes = self.conventional(target, &locked, content, conventions)?;
                let landed =
                    self.replace(target, &locked, &bytes, ChangeKind::Write, Old::Locked(&locked))?;
                release(locked, &landed);
                (false, landed, bytes)
            }
            false => {
                if let Expect::Version(_) = expect.0 {
                    return Err(ProviderError::StaleVersion { path: target.display.clone(), current: None });
                }
                match self.create(target, content.as_bytes()) {
                    Ok(landed) => (true, landed, Cow::Borrowed(content.as_bytes())),
                    Err(ProviderError::AlreadyExists { .. }) if expect.0 == Expect::Any => {
                        // It appeared between our stat and our create: replace it instead.
                        let locked = self.lock_file(target)?;
                        let bytes = self.conventional(target, &locked, content, conventions)?;
                        let old = Old::Locked(&locked);
                        let landed = self.replace(target, &locked, &bytes, ChangeKind::Write, old)?;
                        release(locked, &landed);
                        (false, landed, bytes)
                    }
                    Err(e) => return Err(e),
                }
            }
        };
        let version = self.remember_written(target, &written, &landed);
        let links = landed.links;
        let converted = match written {
            Cow::Owned(bytes) => Some(bytes),
            Cow::Borrowed(_) => None,
        };
        Ok(WriteOutcome { created, version, links, converted, entry: landed.entry })
    }

    /// The bytes to write over the locked file: `content` itself, or with the file's
    /// conventions kept (see [`Conventions::Keep`]), judged on the locked file's own bytes.
    pub(super) fn conventional<'c>(
        &self,
        target: &Resolved,
        locked: &lock::LockedFile,
        content: &'c str,
        conventions: Conventions,
    ) -> Result<Cow<'c, [u8]>, ProviderError> {
        if conventions == Conventions::Exact {
            return Ok(Cow::Borrowed(content.as_bytes()));
        }
        let (bom, crlf) = conventions_of(&locked.file).map_err(|e| io_error(&target.display, "read", e))?;
        let bytes = edit::with_conventions(content, bom, crlf);
        let size = bytes.len() as u64;
        if size > self.config.max_edit_bytes {
            return Err(ProviderError::TooLarge {
                path: target.display.clone(),
                size,
                limit: self.config.max_edit_bytes,
            });
        }
        Ok(bytes)
    }

    /// Makes `change` in the text file at `target`, if it is at `expected`.
    ///
    /// One critical section: path lock, flock, inode re-check, version check (before any
    /// matching, so a stale edit is reported as stale even when `old` no longer matches),
    /// literal match, atomic replace. At [`Pace::AtOnce`] it goes ahead only when that can be
    /// done at once (see `edit_at_once`), else [`Paced::NotAtOnce`] with nothing written; at
    /// [`Pace::Blocking`], always.
    pub fn edit(
        &self,
        target: &Resolved,
        change: &Replacement<'_>,
        expected: Version,
        pace: Pace,
    ) -> Result<Paced<EditOutcome>, ProviderError> {
        match pace {
            Pace::AtOnce => match self.edit_at_once(target, change, expected) {
                Some(edited) => edited.map(Paced::Done),
                None => Ok(Paced::NotAtOnce),
            },
            Pace::Blocking => self.edit_blocking(target, change, expected).map(Paced::Done),
        }
    }

    /// [`Provider::edit`], blocking.
    pub(super) fn edit_blocking(
        &self,
        target: &Resolved,
        change: &Replacement<'_>,
        expected: Version,
    ) -> Result<EditOutcome, ProviderError> {
        self.settle_folder(target);
        let _guard = self.lock_path(target)?;
        let locked = self.lock_edited(target)?;
        self.edit_locked(target, locked, change, expected)
    }

    /// [`Provider::edit`] for an async worker, answered only when it is small and can go ahead
    /// at once: no fsync, a regular file of at most [`AT_ONCE_BYTES`] with one link on a local
    /// filesystem, both locks free right now, and a folder already cleaned of leftovers. `None`
    /// when any of that does not hold; nothing was written then, and the caller runs
    /// [`Provider::edit`] on a blocking thread instead. The critical section is the same one.
    pub(super) fn edit_at_once(
        &self,
        target: &Resolved,
        change: &Replacement<'_>,
        expected: Version,
    ) -> Option<Result<EditOutcome, ProviderError>> {
        let small = target.file.as_ref().is_some_and(|found| found.fingerprint.size <= AT_ONCE_BYTES);
        if self.edit_pace() == Pace::Blocking || !small || !self.leftovers.cleaned(target.path.parent()?) {
            return None;
        }
        let _guard = self.locks.lock(&target.path, std::time::Duration::ZERO)?;
        let locked = lock::lock_file(&target.dir, &target.rel, std::time::Duration::ZERO).ok()?;
        let meta = &locked.meta;
        if !meta.is_file()
            || meta.len() > AT_ONCE_BYTES
            || meta.nlink() != 1
            || !super::mmap::mappable(&locked.file)
        {
            return None;
        }
        Some(self.edit_locked(target, locked, change, expected))
    }

    /// The rest of an edit's critical section, on the locked file (let go of at the end).
    fn edit_locked(
        &self,
        target: &Resolved,
        locked: lock::LockedFile,
        change: &Replacement<'_>,
        expected: Version,
    ) -> Result<EditOutcome, ProviderError> {
        let edited = self.edited(target, &locked, change, expected)?;
        let (out, replacements, regions) = (edited.out, edited.replacements, edited.regions);
        crash_point!("provider::edit::matched");
        let old = Old::Known(edited.base, &edited.old);
        let landed = self.replace(target, &locked, &out, ChangeKind::Edit, old)?;
        release(locked, &landed);
        let version = self.remember_written(target, &out, &landed);
        Ok(EditOutcome {
            replacements,
            version,
            links: landed.links,
            written: out,
            regions,
            entry: landed.entry,
        })
    }

    /// The edit of the locked file: its bytes read whole, the version checked against
    /// `expected` (before any matching, so a stale edit is reported as stale whatever else is
    /// wrong), the text check, the literal match, and the new bytes with the BOM kept.
    pub(super) fn edited(
        &self,
        target: &Resolved,
        locked: &lock::LockedFile,
        change: &Replacement<'_>,
        expected: Version,
    ) -> Result<Edited, ProviderError> {
        let size = locked.meta.len();
        if size > self.config.max_edit_bytes {
            return Err(ProviderError::TooLarge {
                path: target.display.clone(),
                size,
                limit: self.config.max_edit_bytes,
            });
        }
        let bytes = read_all_at(&locked.file, size).map_err(|e| io_error(&target.display, "read", e))?;
        // The version first (a stale edit is reported as stale whatever else is wrong), then
        // whether the bytes are text; an edit needs no line index. Bytes equal to those the
        // store keeps for `expected` (the session's read or its last write put them there; the
        // store's bytes of a version are the very bytes hashed to it) are that version without
        // hashing them again; anything else is hashed.
        let current = match self.store.get(&expected) {
            Some(stored) if stored[..] == bytes[..] => expected,
            _ => Version::of(&bytes),
        };
        if current != expected {
            return Err(ProviderError::StaleVersion { path: target.display.clone(), current: Some(current) });
        }
        let (bom, body) = match bytes.strip_prefix(edit::BOM) {
            Some(rest) => (true, rest),
            None => (false, bytes.as_slice()),
        };
        // Text: valid UTF-8 without NUL. One check on the common path; when it fails, the scan's
        // own check names the first offending byte exactly as a read would.
        let body = match std::str::from_utf8(body) {
            Ok(body) if memchr::memchr(0, body.as_bytes()).is_none() => body,
            _ => {
                let why = index::check_text(&bytes).err().unwrap_or(NotText::InvalidUtf8(0));
                return Err(ProviderError::NotText { path: target.display.clone(), why });
            }
        };
        let applied = edit::apply(body, change).map_err(|miss| match miss {
            edit::Miss::NoMatch { hint } => ProviderError::NoMatch { path: target.display.clone(), hint },
            edit::Miss::Ambiguous(matches) => {
                ProviderError::AmbiguousMatch { path: target.display.clone(), matches }
            }
        })?;
        let regions = edit::regions(&applied.text, &applied.spans);
        let replacements = applied.replacements;
        let out = if bom {
            let mut out = Vec::with_capacity(applied.text.len() + edit::BOM.len());
            out.extend_from_slice(edit::BOM);
            out.extend_from_slice(applied.text.as_bytes());
            out
        } else {
            applied.text.into_bytes()
        };
        Ok(Edited { old: bytes, base: current, out, replacements, regions })
    }

    /// Removes the file at `target` if it is at `expected` (a restore of the change that created
    /// it), under the same locks and version guard as a write, journaled first.
    /// Returns the journal entry that recorded the removal (`None`: not journaled).
    pub fn remove(&self, target: &Resolved, expected: Option<Version>) -> Result<Option<u64>, ProviderError> {
        self.settle_folder(target);
        let _guard = self.lock_path(target)?;
        let locked = self.lock_file(target)?;
        let current = self.version_of(target, &locked.file, &locked.meta)?;
        if expected.is_some_and(|expected| expected != current) {
            return Err(ProviderError::StaleVersion { path: target.display.clone(), current: Some(current) });
        }
        let begun =
            self.journal_begin(target, ChangeKind::Delete, Old::Locked(&locked), Some(&locked.meta), None)?;
        let (dir, name) = self.parent_of(target)?;
        // Moved aside first, then checked to be the very inode locked and hashed: a file another
        // process renamed onto the name meanwhile is put back, never removed.
        let temp = self.leftovers.temp_name(&name.to_string_lossy(), leftovers::Made::Staging);
        let dir_path = target.path.parent().unwrap_or(Path::new("/"));
        self.own.stage(dir_path.join(&temp));
        self.own.expect(&target.path);
        let moved = rustix::fs::renameat(&dir, name, &dir, temp.as_str());
        self.forget(&target.path);
        if let Err(e) = moved {
            self.own.abandon(&target.path);
            return Err(io_error(&target.display, "remove", e.into()));
        }
        let aside = stat_of(rustix::fs::statx(
            &dir,
            temp.as_str(),
            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
            STATX_FINGERPRINT,
        ));
        let locked_inode = (locked.meta.dev(), locked.meta.ino());
        if aside.is_none_or(|(found, _)| (found.dev, found.ino) != locked_inode) {
            let _ = rustix::fs::renameat_with(
                &dir,
                temp.as_str(),
                &dir,
                name,
                rustix::fs::RenameFlags::NOREPLACE,
            );
            self.own.abandon(&target.path);
            return Err(ProviderError::StaleVersion { path: target.display.clone(), current: None });
        }
        let removed = rustix::fs::unlinkat(&dir, temp.as_str(), rustix::fs::AtFlags::empty());
        self.own.abandon(&target.path);
        removed.map_err(|e| io_error(&target.display, "remove", e.into()))?;
        let entry = begun.and_then(|begun| begun.landed().1);
        drop(locked);
        self.sync_dir(&dir, target)?;
        Ok(entry)
    }

    /// The version of bytes we just wrote. What was cached for the file is dropped: an entry
    /// for a file just written would be racy (within the 2 s window), never trusted, so the next
    /// access hashes and indexes it anyway. The watcher is told the version and the fingerprint
    /// of the inode the rename left there (see [`own`](super::own)); a write made in place is
    /// told nothing.
    pub(super) fn remember_written(&self, target: &Resolved, bytes: &[u8], landed: &Landed) -> Version {
        self.forget(&target.path);
        let version = landed.version.unwrap_or_else(|| Version::of(bytes));
        match landed.fingerprint {
            Some(fingerprint) => self.own.wrote(&target.path, fingerprint, version),
            None => self.own.abandon(&target.path),
        }
        version
    }

    /// The folder `target` lives in, opened beneath its root, with the target's own name. Only
    /// as a base of `*at` calls (`O_PATH`: opening it is no event for the folder's watchers)
    /// unless it is to be synced.
    pub(super) fn parent_of<'t>(&self, target: &'t Resolved) -> Result<(OwnedFd, &'t OsStr), ProviderError> {
        let name = file_name(target)?;
        let parent = target.rel.parent().unwrap_or(Path::new(""));
        let dir = if self.config.fsync {
            target.dir.open_dir(parent)
        } else {
            let flags = rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY;
            target.dir.open(parent, flags, rustix::fs::Mode::empty())
        };
        let dir = dir.map_err(|e| io_error(&target.display, "open the folder of", e))?;
        Ok((dir, name))
    }

    fn sync_dir(&self, dir: &OwnedFd, target: &Resolved) -> Result<(), ProviderError> {
        if self.config.fsync {
            rustix::fs::fsync(dir).map_err(|e| io_error(&target.display, "sync the folder of", e.into()))?;
        }
        Ok(())
    }

    /// Writes `bytes` to a new temporary file in `dir` (created exclusively, mode 0600, under
    /// a name nobody can guess) and syncs it; gives it `mode` (and the owner of `like`) on the
    /// descriptor once its content is complete. The caller moves it in place.
    fn stage(
        &self,
        dir: &OwnedFd,
        dir_path: &Path,
        target: &Resolved,
        bytes: &[u8],
        mode: u32,
        like: Option<&Metadata>,
    ) -> Result<(String, File), ProviderError> {
        self.leftovers.clean_once(dir, dir_path);
        let name = target.rel.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let (temp, mut file) = self
            .leftovers
            .create(dir, &name, &|temp| self.own.stage(dir_path.join(temp)))
            .map_err(|e| io_error(&target.display, "create a temporary file for", e))?;
        crash_point!("provider::stage::created");
        let staged = (|| -> std::io::Result<()> {
            // Tests: a full disk while the temporary file is written (FILECTX_FAILPOINTS).
            #[cfg(feature = "failpoints")]
            fail::fail_point!("provider::stage::write", |_| Err(std::io::Error::from_raw_os_error(
                libc::ENOSPC
            )));
            // Two writes only when a test armed the crash points (one to die between).
            #[cfg(feature = "failpoints")]
            let bytes = if super::crash::armed() {
                let (head, tail) = bytes.split_at(bytes.len() / 2);
                file.write_all(head)?;
                crash_point!("provider::stage::half_written");
                tail
            } else {
                bytes
            };
            file.write_all(bytes)?;
            if self.config.fsync {
                file.sync_data()?;
            }
            if let Some(meta) = like
                && (meta.uid(), meta.gid()) != *OWNER
            {
                // Only root (or the owner, for the group) may do this; keep going if refused.
                let _ = rustix::fs::fchown(
                    &file,
                    Some(rustix::fs::Uid::from_raw(meta.uid())),
                    Some(rustix::fs::Gid::from_raw(meta.gid())),
                );
            }
            // The final mode only now that the content is complete (after fchown, which may
            // clear set-id bits).
            rustix::fs::fchmod(&file, rustix::fs::Mode::from_raw_mode(mode & 0o7777))?;
            crash_point!("provider::stage::written");
            Ok(())
        })();
        if let Err(e) = staged {
            let _ = rustix::fs::unlinkat(dir, temp.as_str(), rustix::fs::AtFlags::empty());
            return Err(io_error(&target.display, "write", e));
        }
        Ok((temp, file))
    }

    /// Replaces an existing (locked) file's content: atomically by rename, or in place (under
    /// the locks) when the file has several hard links, so that it stays one file shared by all
    /// of them (see [`inplace`](super::inplace): old or new content, never a mix). The change
    /// (`kind`, replacing `old`) is journaled before anything lands. Returns where it landed.
    pub(super) fn replace(
        &self,
        target: &Resolved,
        locked: &lock::LockedFile,
        bytes: &[u8],
        kind: ChangeKind,
        old: Old<'_>,
    ) -> Result<Landed, ProviderError> {
        let begun = self.journal_begin(target, kind, old, Some(&locked.meta), Some(bytes))?;
        let mut landed = self.replace_journaled(target, locked, bytes)?;
        if let Some(begun) = begun {
            (landed.version, landed.entry) = begun.landed();
        }
        Ok(landed)
    }

    /// [`Provider::replace`] once its change is journaled.
    fn replace_journaled(
        &self,
        target: &Resolved,
        locked: &lock::LockedFile,
        bytes: &[u8],
    ) -> Result<Landed, ProviderError> {
        let meta = &locked.meta;
        if meta.nlink() > 1 {
            if target.one_name {
                return Err(ProviderError::Linked { path: target.display.clone(), links: meta.nlink() });
            }
            if self.config.refuse_multi_link_writes {
                return Err(ProviderError::Refused {
                    path: target.display.clone(),
                    why: format!(
                        "it has {} hard links, and this daemon refuses writes to files with several \
                         (refuse_multi_link_writes)",
                        meta.nlink()
                    ),
                });
            }
            return self.rewrite_in_place(target, locked, bytes);
        }
        let (dir, name) = self.parent_of(target)?;
        let dir_path = target.path.parent().unwrap_or(Path::new("/"));
        let (temp, file) = self.stage(&dir, dir_path, target, bytes, meta.mode(), Some(meta))?;
        let landed = match self.land(&dir, &temp, file, name, target, rustix::fs::RenameFlags::empty()) {
            Ok(landed) => landed,
            Err(e) => {
                let _ = rustix::fs::unlinkat(&dir, temp.as_str(), rustix::fs::AtFlags::empty());
                return Err(io_error(&target.display, "replace", e.into()));
            }
        };
        crash_point!("provider::replace::renamed");
        self.sync_dir(&dir, target)?;
        Ok(landed)
    }

    /// Renames the staged file `temp` (open as `file`) to `name` in `dir` (with `flags`), and
    /// tells the watcher (see [`own`](super::own)): the path is marked before the rename, and
    /// what landed is the fingerprint of the very inode staged, looked at after the rename.
    /// The staged file is closed first, so that its last event (`IN_CLOSE_WRITE`) names the
    /// temporary file, not the target. Returns the errno of a failed rename (the caller removes
    /// the temporary file).
    fn land(
        &self,
        dir: &OwnedFd,
        temp: &str,
        file: File,
        name: &OsStr,
        target: &Resolved,
        flags: rustix::fs::RenameFlags,
    ) -> Result<Landed, rustix::io::Errno> {
        let staged =
            stat_of(rustix::fs::statx(&file, "", rustix::fs::AtFlags::EMPTY_PATH, STATX_FINGERPRINT));
        drop(file);
        self.own.expect(&target.path);
        let renamed = if flags.is_empty() {
            rustix::fs::renameat(dir, temp, dir, name)
        } else {
            rustix::fs::renameat_with(dir, temp, dir, name, flags)
        };
        if let Err(e) = renamed {
            self.own.abandon(&target.path);
            return Err(e);
        }
        // The name now, never through a symlink: it must still be the inode we staged.
        let now =
            stat_of(rustix::fs::statx(dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW, STATX_FINGERPRINT));
        match (staged, now) {
            (Some((staged, _)), Some((now, links))) if (staged.dev, staged.ino) == (now.dev, now.ino) => {
                Ok(Landed { renamed: true, links, fingerprint: Some(now), version: None, entry: None })
            }
            (_, now) => {
                self.own.abandon(&target.path);
                Ok(Landed {
                    renamed: true,
                    links: now.map_or(1, |(_, links)| links),
                    fingerprint: None,
                    version: None,
                    entry: None,
                })
            }
        }
    }

    /// Opens (creating what is missing) the folder `target` is to be created in, one
    /// component at a time beneath the root: a folder swapped for a symlink meanwhile fails.
    fn make_parent<'t>(&self, target: &'t Resolved) -> Result<(OwnedFd, &'t OsStr), ProviderError> {
        let io = |op, e: std::io::Error| io_error(&target.display, op, e);
        let name = file_name(target)?;
        let parent = target.rel.parent().unwrap_or(Path::new(""));
        // The deepest folder of `parent` that exists; the rest is created below it.
        let mut existing = parent;
        let dir = loop {
            match target.dir.open_dir(existing) {
                Ok(dir) => break dir,
                Err(e) if e.kind() == ErrorKind::NotFound && !existing.as_os_str().is_empty() => {
                    existing = existing.parent().unwrap_or(Path::new(""));
                }
                Err(e) => return Err(io("open the folder of", e)),
            }
        };
        let mut dir = dir;
        let rest = parent.strip_prefix(existing).unwrap_or(Path::new(""));
        for component in rest.components() {
            let part = component.as_os_str();
            match rustix::fs::mkdirat(&dir, part, rustix::fs::Mode::from_raw_mode(0o777)) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                Err(e) => return Err(io("create the folder of", e.into())),
            }
            dir = beneath::open_beneath(
                &dir,
                Path::new(part),
                rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY,
                rustix::fs::Mode::empty(),
            )
            .map_err(|e| io("create the folder of", e))?;
        }
        Ok((dir, name))
    }

    /// Creates a new file with `bytes`, never clobbering one that appeared meanwhile; returns
    /// where it landed (one hard link).
    pub(super) fn create(&self, target: &Resolved, bytes: &[u8]) -> Result<Landed, ProviderError> {
        let (dir, name) = self.make_parent(target)?;
        let begun = self.journal_begin(target, ChangeKind::Create, Old::Absent, None, Some(bytes))?;
        let mut landed = self.create_in(target, &dir, name, bytes)?;
        if let Some(begun) = begun {
            (landed.version, landed.entry) = begun.landed();
        }
        Ok(landed)
    }

    /// [`Provider::create`] once its change is journaled, in the folder `dir` made for it.
    fn create_in(
        &self,
        target: &Resolved,
        dir: &OwnedFd,
        name: &OsStr,
        bytes: &[u8],
    ) -> Result<Landed, ProviderError> {
        let dir_path = target.path.parent().unwrap_or(Path::new("/"));
        let mode = target.create_mode.unwrap_or(0o666 & !*leftovers::UMASK);
        let (temp, file) = self.stage(dir, dir_path, target, bytes, mode, None)?;
        let moved = self.land(dir, &temp, file, name, target, rustix::fs::RenameFlags::NOREPLACE);
        let result = match moved {
            Ok(landed) => {
                crash_point!("provider::create::renamed");
                self.sync_dir(dir, target)?;
                return Ok(landed);
            }
            Err(rustix::io::Errno::EXIST) => {
                Err(ProviderError::AlreadyExists { path: target.display.clone() })
            }
            // Filesystems without RENAME_NOREPLACE: link(2) also refuses to clobber.
            Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS | rustix::io::Errno::NOTSUP) => {
                match rustix::fs::linkat(dir, temp.as_str(), dir, name, rustix::fs::AtFlags::empty()) {
                    Ok(()) => Ok(1),
                    Err(rustix::io::Errno::EXIST) => {
                        Err(ProviderError::AlreadyExists { path: target.display.clone() })
                    }
                    Err(e) => Err(io_error(&target.display, "create", e.into())),
                }
            }
            Err(errno) => Err(io_error(&target.display, "create", errno.into())),
        };
        let _ = rustix::fs::unlinkat(dir, temp.as_str(), rustix::fs::AtFlags::empty());
        result?;
        self.sync_dir(dir, target)?;
        Ok(Landed { renamed: false, links: 1, fingerprint: None, version: None, entry: None })
    }
}

/// Whether the open file starts with a BOM, and whether its endings are CRLF (at least one
/// `\r\n`, no bare `\n`: the rule edits use). Read in chunks with positional reads, stopping
/// at the first bare `\n`.
fn conventions_of(file: &File) -> std::io::Result<(bool, bool)> {
    let mut buf = vec![0u8; 64 * 1024];
    let (mut at, mut bom, mut seen, mut before) = (0u64, false, false, 0u8);
    loop {
        let n = match file.read_at(&mut buf, at) {
            Ok(0) => return Ok((bom, seen)),
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let chunk = &buf[..n];
        if at == 0 {
            // A first read shorter than the BOM is only possible for a file that short.
            bom = chunk.starts_with(edit::BOM);
        }
        for i in memchr::memchr_iter(b'\n', chunk) {
            let previous = if i == 0 { before } else { chunk[i - 1] };
            if previous != b'\r' {
                return Ok((bom, false));
            }
            seen = true;
        }
        before = chunk[n - 1];
        at += n as u64;
    }
}

/// The name `target` has in its folder (a root itself has none: it is a folder).
fn file_name(target: &Resolved) -> Result<&OsStr, ProviderError> {
    target
        .rel
        .file_name()
        .filter(|name| beneath::is_plain_name(name))
        .ok_or_else(|| ProviderError::IsDirectory { path: target.display.clone() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::{ProviderConfig, RootDir, Scope};

    fn setup(fsync: bool) -> (tempfile::TempDir, std::path::PathBuf, Provider) {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        (dir, root, Provider::new(ProviderConfig { fsync, ..Default::default() }))
    }

    #[test]
    fn an_edit_is_made_at_once_only_when_it_can_go_ahead_at_once() {
        let (_dir, root, provider) = setup(false);
        let roots = [RootDir::new(&root, None).unwrap()];
        let scope = Scope { roots: &roots, cwd: &root };
        std::fs::write(root.join("a.txt"), "one two three\n").unwrap();
        let change = Replacement::new("two", "2", false).unwrap();
        let base = Version::of(b"one two three\n");
        let target = provider.resolve("a.txt", scope).unwrap();
        assert!(provider.edit_at_once(&target, &change, base).is_none(), "the folder is not cleaned yet");

        let done =
            provider.edit_blocking(&target, &Replacement::new("one", "1", false).unwrap(), base).unwrap();
        let target = provider.resolve("a.txt", scope).unwrap();
        let held = lock::lock_file(&target.dir, &target.rel, std::time::Duration::ZERO).unwrap();
        assert!(provider.edit_at_once(&target, &change, done.version).is_none(), "another holds the flock");
        drop(held);
        let guard = provider.lock_path(&target).unwrap();
        assert!(provider.edit_at_once(&target, &change, done.version).is_none(), "the path lock is held");
        drop(guard);
        let stale = provider.edit_at_once(&target, &change, base).unwrap();
        assert!(
            matches!(stale, Err(ProviderError::StaleVersion { current: Some(v), .. }) if v == done.version)
        );
        assert_eq!(std::fs::read(root.join("a.txt")).unwrap(), b"1 two three\n", "nothing written yet");

        let made = provider.edit_at_once(&target, &change, done.version).unwrap().unwrap();
        assert_eq!(std::fs::read(root.join("a.txt")).unwrap(), b"1 2 three\n");
        assert_eq!(made.version, Version::of(b"1 2 three\n"));
        assert_eq!((made.replacements, made.links), (1, 1));

        // Too big for at once (by what resolving saw, and by what the locked file says).
        let big = "x".repeat(usize::try_from(AT_ONCE_BYTES).unwrap() + 1);
        std::fs::write(root.join("b.txt"), &big).unwrap();
        let target = provider.resolve("b.txt", scope).unwrap();
        let change = Replacement::new("xx", "y", true).unwrap();
        assert!(provider.edit_at_once(&target, &change, Version::of(big.as_bytes())).is_none());
        std::fs::write(root.join("c.txt"), "small").unwrap();
        let target = provider.resolve("c.txt", scope).unwrap();
        std::fs::write(root.join("c.txt"), &big).unwrap();
        assert!(provider.edit_at_once(&target, &change, Version::of(big.as_bytes())).is_none());
        assert_eq!(std::fs::read(root.join("c.txt")).unwrap(), big.as_bytes(), "nothing written");
    }

    #[test]
    fn the_version_check_takes_stored_bytes_only_when_they_are_the_files() {
        let (_dir, root, provider) = setup(false);
        let roots = [RootDir::new(&root, None).unwrap()];
        let scope = Scope { roots: &roots, cwd: &root };
        let seen = b"alpha beta gamma\n";
        std::fs::write(root.join("a.txt"), seen).unwrap();
        let expected = Version::of(seen);
        provider.store().put(expected, Cow::Borrowed(seen));
        let target = provider.resolve("a.txt", scope).unwrap();
        let change = Replacement::new("beta", "BETA", false).unwrap();
        // Changed outside to other bytes of the same size: stale, with the version of what is
        // there now, though the store keeps the bytes of the expected version.
        let outside = b"alpha beta GAMMA\n";
        std::fs::write(root.join("a.txt"), outside).unwrap();
        let stale = provider.edit_blocking(&target, &change, expected);
        assert!(
            matches!(stale, Err(ProviderError::StaleVersion { current: Some(v), .. }) if v == Version::of(outside))
        );
        assert_eq!(std::fs::read(root.join("a.txt")).unwrap(), outside, "nothing written");
        // Stored bytes of another version than the expected one prove nothing either.
        provider.store().put(Version::of(outside), Cow::Borrowed(outside));
        let stale = provider.edit_blocking(&target, &change, expected);
        assert!(
            matches!(stale, Err(ProviderError::StaleVersion { current: Some(v), .. }) if v == Version::of(outside))
        );
        // Back to the stored bytes: the edit goes ahead (at once too, once the folder is clean).
        std::fs::write(root.join("a.txt"), seen).unwrap();
        let made = provider.edit_blocking(&target, &change, expected).unwrap();
        assert_eq!(made.version, Version::of(b"alpha BETA gamma\n"));
        provider.store().put(made.version, Cow::Borrowed(b"alpha BETA gamma\n"));
        let again = Replacement::new("gamma", "G", false).unwrap();
        let target = provider.resolve("a.txt", scope).unwrap();
        let made = provider.edit_at_once(&target, &again, made.version).unwrap().unwrap();
        assert_eq!(std::fs::read(root.join("a.txt")).unwrap(), b"alpha BETA G\n");
        assert_eq!(made.version, Version::of(b"alpha BETA G\n"));
    }

    #[test]
    fn without_fsync_the_first_replace_in_a_folder_still_removes_leftovers() {
        // The folder is then opened O_PATH: the leftovers' listing opens it for reading itself.
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let token = "0123456789abcdef";
        let config = ProviderConfig { fsync: false, staging_token: Some(token.into()), ..Default::default() };
        let provider = Provider::new(config);
        let roots = [RootDir::new(&root, None).unwrap()];
        let scope = Scope { roots: &roots, cwd: &root };
        // Left by a daemon that is gone (no process has that pid).
        let leftover = format!(".a.txt.filectx-{token}-00000000-2147483646-1-{}.tmp", "0".repeat(32));
        std::fs::write(root.join(&leftover), "half").unwrap();
        std::fs::write(root.join("a.txt"), "one two\n").unwrap();
        let target = provider.resolve("a.txt", scope).unwrap();
        let change = Replacement::new("one", "1", false).unwrap();
        provider.edit_blocking(&target, &change, Version::of(b"one two\n")).unwrap();
        assert_eq!(std::fs::read(root.join("a.txt")).unwrap(), b"1 two\n");
        assert!(!root.join(&leftover).exists(), "the leftover was not removed");
    }

    #[test]
    fn with_fsync_an_edit_is_never_made_at_once() {
        let (_dir, root, provider) = setup(true);
        let roots = [RootDir::new(&root, None).unwrap()];
        let scope = Scope { roots: &roots, cwd: &root };
        std::fs::write(root.join("a.txt"), "one two\n").unwrap();
        let target = provider.resolve("a.txt", scope).unwrap();
        let base = Version::of(b"one two\n");
        let done =
            provider.edit_blocking(&target, &Replacement::new("one", "1", false).unwrap(), base).unwrap();
        let target = provider.resolve("a.txt", scope).unwrap();
        let change = Replacement::new("two", "2", false).unwrap();
        assert!(provider.edit_at_once(&target, &change, done.version).is_none());
    }
}
