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
//! the next daemon's first look at that folder ([`recover`]) finds it, and puts the old content
//! back when the file holds neither version (and is no longer than the longer of the two).

use std::ffi::OsStr;
use std::fs::File;
use std::io::ErrorKind;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;
use std::time::{Duration, Instant};

use fs2::FileExt as _;
use rustix::fs::{AtFlags, FallocateFlags, Mode, OFlags};

use super::error::io_error;
use super::leftovers::{Made, crash_point};
use super::lock::LockedFile;
use super::write::Landed;
use super::{Provider, ProviderError, Resolved, Version};

/// Bytes of a copy's header; the old content follows it.
pub(super) const HEADER_BYTES: u64 = 1024;

/// The first line of a copy's header (its format's version is the number).
const MAGIC: &str = "filectx in-place copy 1";

/// Bytes moved at once between the file and its copy.
const CHUNK: usize = 64 * 1024;

/// What a copy says it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Header {
    /// The device and inode of the file rewritten.
    dev: u64,
    ino: u64,
    /// Its name in the folder.
    name: Vec<u8>,
    /// The old content's length and version (the copy holds it).
    old_len: u64,
    old: Version,
    /// The new content's length and version.
    new_len: u64,
    new: Version,
}

impl Header {
    /// The header as written: lines of text, padded with newlines to [`HEADER_BYTES`].
    fn encode(&self) -> Vec<u8> {
        let name: String = self.name.iter().map(|b| format!("{b:02x}")).collect();
        let text = format!(
            "{MAGIC}\ndev={}\nino={}\nname={name}\nold={}:{}\nnew={}:{}\nend\n",
            self.dev, self.ino, self.old_len, self.old, self.new_len, self.new
        );
        let mut bytes = text.into_bytes();
        bytes.resize(HEADER_BYTES as usize, b'\n');
        bytes
    }

    /// The header read back; `None` for anything else (a copy whose header was never written).
    fn decode(bytes: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(bytes).ok()?;
        let mut lines = text.lines();
        if lines.next()? != MAGIC {
            return None;
        }
        let mut field = |key: &str| lines.next()?.strip_prefix(key)?.strip_prefix('=').map(str::to_owned);
        let dev = field("dev")?.parse().ok()?;
        let ino = field("ino")?.parse().ok()?;
        let hex = field("name")?;
        let version = |text: String| -> Option<(u64, Version)> {
            let (len, hash) = text.split_once(':')?;
            Some((len.parse().ok()?, Version::parse(hash)?))
        };
        let (old_len, old) = version(field("old")?)?;
        let (new_len, new) = version(field("new")?)?;
        if lines.next()? != "end" || hex.len() % 2 != 0 || hex.is_empty() || hex.len() > 2 * 255 {
            return None;
        }
        let name = (0..hex.len())
            .step_by(2)
            .map(|at| u8::from_str_radix(hex.get(at..at + 2)?, 16).ok())
            .collect::<Option<Vec<u8>>>()?;
        Some(Self { dev, ino, name, old_len, old, new_len, new })
    }
}

/// Reads `file` from `from` to its end (at most `limit` bytes) in chunks, handing each to
/// `each` with its offset; returns how many bytes there were.
fn each_chunk(
    file: &File,
    from: u64,
    limit: u64,
    each: &mut dyn FnMut(&[u8], u64) -> std::io::Result<()>,
) -> std::io::Result<u64> {
    let mut buf = vec![0u8; CHUNK];
    let mut done = 0u64;
    loop {
        let n = match file.read_at(&mut buf, from + done) {
            Ok(0) => return Ok(done),
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if done + n as u64 > limit {
            return Err(std::io::Error::new(ErrorKind::FileTooLarge, "longer than it may be"));
        }
        each(&buf[..n], done)?;
        done += n as u64;
    }
}

/// The version of `file`'s bytes from `from` to its end (at most `limit`), and their length.
fn version_from(file: &File, from: u64, limit: u64) -> std::io::Result<(Version, u64)> {
    let mut hasher = blake3::Hasher::new();
    let len = each_chunk(file, from, limit, &mut |chunk, _| {
        hasher.update(chunk);
        Ok(())
    })?;
    Ok((Version::from_hash(hasher.finalize()), len))
}

/// Writes the copy's old content (after its header) back over `file`, and gives the file that
/// length again: the old content, whatever part of the new one had been written.
fn put_back(copy: &File, file: &File, old_len: u64, sync: bool) -> std::io::Result<()> {
    each_chunk(copy, HEADER_BYTES, old_len, &mut |chunk, at| file.write_all_at(chunk, at))?;
    file.set_len(old_len)?;
    if sync {
        file.sync_data()?;
    }
    Ok(())
}

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
        Ok(Landed { renamed: false, links: now.nlink(), fingerprint: None })
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
        if super::leftovers::armed() {
            let half = bytes.len() / 2;
            file.write_all_at(&bytes[..half], 0)?;
            crash_point!("provider::inplace::half_written");
            // Tests: a full disk or a quota halfway through (`=return(EDQUOT)`).
            fail::fail_point!("provider::inplace::write", |errno| Err(super::leftovers::errno_named(errno)));
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

/// What became of a dead daemon's copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Recovered {
    /// The file was torn: its old content is back (the file's name), and the copy is gone.
    Restored(String),
    /// The copy was removed, nothing else touched: why.
    Removed(&'static str),
    /// The copy was left where it is: why.
    Kept(&'static str),
}

/// Uses the copy `name` in `dir`, left by a daemon that died rewriting a file in place: under
/// the file's lock (waiting at most `patience`), puts the old content back when the file is
/// the very inode the copy names and holds neither its old nor its new version, no longer than
/// the longer of the two; removes the copy when it is no longer needed (the file is whole, or
/// the copy itself is incomplete: the file was not touched before it was complete). A copy
/// whose file is gone or is another inode now is kept, for a person to look at.
pub(super) fn recover(dir: &OwnedFd, name: &str, patience: Duration) -> std::io::Result<Recovered> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let copy = File::from(rustix::fs::openat(dir, name, flags, Mode::empty())?);
    let copy_meta = copy.metadata()?;
    let remove = |why| -> std::io::Result<Recovered> {
        rustix::fs::unlinkat(dir, name, AtFlags::empty())?;
        Ok(Recovered::Removed(why))
    };
    let mut head = vec![0u8; HEADER_BYTES as usize];
    let header = match copy.read_exact_at(&mut head, 0) {
        Ok(()) => Header::decode(&head),
        Err(e) if e.kind() == ErrorKind::UnexpectedEof => None,
        Err(e) => return Err(e),
    };
    let Some(header) = header else {
        return remove("its header was never written: the file was not touched");
    };
    if copy_meta.len() != HEADER_BYTES + header.old_len
        || version_from(&copy, HEADER_BYTES, header.old_len)?.0 != header.old
    {
        return remove("it is incomplete: the file was not touched");
    }
    let target_name = OsStr::from_bytes(&header.name);
    if !super::beneath::is_plain_name(target_name) {
        return Ok(Recovered::Kept("it names no file of this folder"));
    }
    let flags = OFlags::RDWR | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let file = match rustix::fs::openat(dir, target_name, flags, Mode::empty()) {
        Ok(fd) => File::from(fd),
        Err(rustix::io::Errno::NOENT) => return Ok(Recovered::Kept("its file is gone")),
        Err(e) => return Err(e.into()),
    };
    let meta = file.metadata()?;
    if !meta.is_file() || (meta.dev(), meta.ino()) != (header.dev, header.ino) {
        return Ok(Recovered::Kept("its file's name is another file now"));
    }
    // The lock every write of this family takes: no daemon writes the file meanwhile.
    let deadline = Instant::now() + patience;
    while file.try_lock_exclusive().is_err() {
        if Instant::now() >= deadline {
            return Ok(Recovered::Kept("its file's lock stayed taken"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // Another daemon may have used the copy while this one waited for the lock.
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) if stat.st_ino == copy_meta.ino() => {}
        _ => return Ok(Recovered::Removed("another daemon used it first")),
    }
    let limit = header.old_len.max(header.new_len);
    if file.metadata()?.len() > limit {
        return remove("its file was changed since (it is longer than either version)");
    }
    let (now, _) = version_from(&file, 0, limit)?;
    if now == header.old || now == header.new {
        return remove("its file holds a whole version");
    }
    put_back(&copy, &file, header.old_len, true)?;
    rustix::fs::unlinkat(dir, name, AtFlags::empty())?;
    Ok(Recovered::Restored(target_name.to_string_lossy().into_owned()))
}

/// Reserves `len` bytes of `file` from `from` without changing its size (`fallocate` with
/// `FALLOC_FL_KEEP_SIZE`), so that a full disk or a quota shows before a byte changes.
fn reserve(file: &File, from: u64, len: u64) -> rustix::io::Result<()> {
    // Tests: a full disk or a quota when reserving (`=return(EDQUOT)`).
    #[cfg(feature = "failpoints")]
    fail::fail_point!("provider::inplace::reserve", |errno| {
        let errno = super::leftovers::errno_named(errno).raw_os_error().unwrap_or(libc::ENOSPC);
        Err(rustix::io::Errno::from_raw_os_error(errno))
    });
    rustix::fs::fallocate(file, FallocateFlags::KEEP_SIZE, from, len)
}

#[cfg(test)]
mod tests {
    use super::super::leftovers::{Cleaned, Leftovers, dead_name};
    use super::*;

    const TOKEN: &str = "0123456789abcdef";

    /// A folder with `a.txt` holding `now`, and a dead daemon's copy for it saying the old
    /// content was `old` and the new one `new` (`whole`: the copy is complete). Returns the
    /// folder, its handle and the copy's name.
    fn torn(now: &[u8], old: &[u8], new: &[u8], whole: bool) -> (tempfile::TempDir, OwnedFd, String) {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("a.txt");
        std::fs::write(&target, now).unwrap();
        let meta = std::fs::metadata(&target).unwrap();
        let header = Header {
            dev: meta.dev(),
            ino: meta.ino(),
            name: b"a.txt".to_vec(),
            old_len: old.len() as u64,
            old: Version::of(old),
            new_len: new.len() as u64,
            new: Version::of(new),
        };
        let mut copy = if whole { header.encode() } else { vec![0u8; HEADER_BYTES as usize] };
        copy.extend_from_slice(old);
        let name = dead_name("a.txt", TOKEN, Made::Copy);
        std::fs::write(dir.path().join(&name), copy).unwrap();
        let fd = rustix::fs::open(dir.path(), OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).unwrap();
        (dir, fd, name)
    }

    fn clean(fd: &OwnedFd, dir: &Path) -> Cleaned {
        Leftovers::new(Some(TOKEN.into())).with_patience(Duration::from_millis(200)).clean(fd, dir)
    }

    #[test]
    fn a_torn_file_is_put_back_from_a_dead_daemons_copy() {
        let (old, new) = (b"the old content\n".repeat(100), b"the new one\n".repeat(300));
        // Killed halfway: the new content's start over the old.
        let mut now = new[..800].to_vec();
        now.extend_from_slice(&old[800..]);
        let (dir, fd, name) = torn(&now, &old, &new, true);
        assert_eq!(clean(&fd, dir.path()), Cleaned { removed: 1, restored: 1 });
        assert_eq!(std::fs::read(dir.path().join("a.txt")).unwrap(), old);
        assert!(!dir.path().join(&name).exists(), "the copy is removed once used");
        // Killed after the new content was whole but before its length was cut: the same.
        let (old, new) = (b"long old content\n".repeat(100), b"short new\n".to_vec());
        let mut now = new.clone();
        now.extend_from_slice(&old[new.len()..]);
        let (dir, fd, _) = torn(&now, &old, &new, true);
        assert_eq!(clean(&fd, dir.path()).restored, 1);
        assert_eq!(std::fs::read(dir.path().join("a.txt")).unwrap(), old);
    }

    #[test]
    fn a_whole_file_an_incomplete_copy_or_a_later_change_is_left_as_it_is() {
        let (old, new) = (b"old\n".repeat(50), b"new\n".repeat(80));
        let mut half = new[..100].to_vec();
        half.extend_from_slice(&old[100..]);
        let longer = b"x".repeat(1000);
        // (what the file holds, whether the copy is complete)
        for (now, whole) in [(&old, true), (&new, true), (&half, false), (&longer, true)] {
            let (dir, fd, name) = torn(now, &old, &new, whole);
            assert_eq!(clean(&fd, dir.path()), Cleaned { removed: 1, restored: 0 });
            assert_eq!(&std::fs::read(dir.path().join("a.txt")).unwrap(), now, "untouched");
            assert!(!dir.path().join(&name).exists(), "the copy is no longer needed");
        }
    }

    #[test]
    fn a_copy_whose_file_is_another_now_is_kept() {
        let (old, new) = (b"old\n".repeat(50), b"new\n".repeat(80));
        let (dir, fd, name) = torn(&new[..10], &old, &new, true);
        // Another file renamed over the name since: not the inode the copy belongs to.
        std::fs::write(dir.path().join("b.txt"), "someone else's\n").unwrap();
        std::fs::rename(dir.path().join("b.txt"), dir.path().join("a.txt")).unwrap();
        assert_eq!(clean(&fd, dir.path()), Cleaned::default());
        assert_eq!(std::fs::read(dir.path().join("a.txt")).unwrap(), b"someone else's\n");
        assert!(dir.path().join(&name).exists(), "kept for a person to look at");
        // And a torn file whose lock another holds is left for a later daemon.
        let (dir, fd, name) = torn(&new[..10], &old, &new, true);
        let held = std::fs::File::open(dir.path().join("a.txt")).unwrap();
        held.lock_exclusive().unwrap();
        assert_eq!(clean(&fd, dir.path()), Cleaned::default());
        assert!(dir.path().join(&name).exists());
        drop(held);
        assert_eq!(clean(&fd, dir.path()).restored, 1);
        assert_eq!(std::fs::read(dir.path().join("a.txt")).unwrap(), old);
    }

    #[test]
    fn a_header_reads_back_as_written_and_nothing_else_reads_as_one() {
        let header = Header {
            dev: 2049,
            ino: 1 << 40,
            name: "naïve name.txt".as_bytes().to_vec(),
            old_len: 10,
            old: Version::of(b"old"),
            new_len: 1 << 33,
            new: Version::of(b"new"),
        };
        let bytes = header.encode();
        assert_eq!(bytes.len() as u64, HEADER_BYTES);
        assert_eq!(Header::decode(&bytes), Some(header.clone()));
        assert_eq!(Header::decode(&vec![0u8; HEADER_BYTES as usize]), None, "never written");
        let cut = String::from_utf8(bytes).unwrap().replace("\nend\n", "\n");
        assert_eq!(Header::decode(cut.as_bytes()), None, "no end line");
        let long = Header { name: vec![b'x'; 256], ..header };
        assert_eq!(Header::decode(&long.encode()), None, "a name longer than a file name may be");
    }
}
