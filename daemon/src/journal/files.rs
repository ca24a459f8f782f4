//! The journal's file handling, beneath the handle of its own folder: every name is opened
//! with `O_NOFOLLOW` relative to the folder holding it, so a link planted among the journal's
//! files (a process of the same user could) is never followed: not read, not written through,
//! and never the way the journal's cleanup reaches anything outside.

use std::ffi::OsStr;
use std::fs::File;
use std::io::Write as _;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use crate::provider::private::Private;

/// Opens the folder at `path` (its last component not a link), creating it with mode 0700 and
/// what leads to it when missing.
pub(super) fn open_folder(path: &Path) -> std::io::Result<OwnedFd> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(path)?;
    let fd = rustix::fs::open(path, folder_flags(), Mode::empty())?;
    rustix::fs::fchmod(&fd, Mode::from_raw_mode(0o700))?;
    Ok(fd)
}

fn folder_flags() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

/// Opens the subfolder `name` of `dir`, never through a link; `None` when there is none.
pub(super) fn subfolder(dir: impl AsFd, name: &OsStr) -> std::io::Result<Option<OwnedFd>> {
    match rustix::fs::openat(dir, name, folder_flags(), Mode::empty()) {
        Ok(fd) => Ok(Some(fd)),
        Err(Errno::NOENT) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Opens the subfolder `name` of `dir`, made (0700) when missing; something else under that
/// name (a file, a link) is removed first, never followed. Whether it was made.
pub(super) fn make_subfolder(dir: impl AsFd, name: &OsStr) -> std::io::Result<(OwnedFd, bool)> {
    let dir = dir.as_fd();
    let mut made = false;
    for _ in 0..3 {
        match rustix::fs::openat(dir, name, folder_flags(), Mode::empty()) {
            Ok(fd) => return Ok((fd, made)),
            Err(Errno::NOENT) => {}
            Err(Errno::LOOP | Errno::NOTDIR) => {
                tracing::warn!(name = %name.to_string_lossy(), "the journal's folder held a link or file where a folder of its own belongs: removed (not followed)");
                rustix::fs::unlinkat(dir, name, AtFlags::empty())?;
            }
            Err(e) => return Err(e.into()),
        }
        match rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(0o700)) {
            Ok(()) => made = true,
            Err(Errno::EXIST) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Err(Errno::AGAIN.into())
}

/// Opens the regular file `name` of `dir` for reading, never through a link and never
/// blocking; `Ok(None)` when it is missing or is anything but a regular file.
pub(super) fn open_regular(dir: impl AsFd, name: &OsStr) -> std::io::Result<Option<File>> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let file = match rustix::fs::openat(dir, name, flags, Mode::empty()) {
        Ok(fd) => File::from(fd),
        Err(Errno::NOENT | Errno::LOOP) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    Ok(file.metadata()?.is_file().then_some(file))
}

/// Reads the regular file `name` of `dir` whole (at most `max` bytes: `None` past it).
pub(super) fn read_regular(dir: impl AsFd, name: &OsStr, max: u64) -> std::io::Result<Option<Vec<u8>>> {
    use std::io::Read as _;
    let Some(file) = open_regular(dir, name)? else { return Ok(None) };
    let len = file.metadata()?.len();
    if len > max {
        return Ok(None);
    }
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    file.take(max + 1).read_to_end(&mut bytes)?;
    Ok((bytes.len() as u64 <= max).then_some(bytes))
}

/// Writes `bytes` as the file `name` of `dir`, whole or not at all: under a new temporary
/// name (0600, `O_EXCL`), synced when `fsync`, then renamed over `name` (and the folder synced).
/// The new file is told to `private`.
pub(super) fn write_whole(
    dir: impl AsFd,
    name: &OsStr,
    bytes: &[u8],
    fsync: bool,
    private: &Private,
) -> std::io::Result<()> {
    let dir = dir.as_fd();
    let temp = format!(".tmp-{}", crate::random::hex(8)?);
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let written = (|| -> std::io::Result<()> {
        let mut file = File::from(rustix::fs::openat(dir, temp.as_str(), flags, Mode::from_raw_mode(0o600))?);
        file.write_all(bytes)?;
        if fsync {
            file.sync_data()?;
        }
        let stat = rustix::fs::fstat(&file)?;
        private.created(stat.st_dev, stat.st_ino);
        rustix::fs::renameat(dir, temp.as_str(), dir, name)?;
        if fsync {
            rustix::fs::fsync(dir)?;
        }
        Ok(())
    })();
    if written.is_err() {
        let _ = rustix::fs::unlinkat(dir, temp.as_str(), AtFlags::empty());
    }
    written
}

/// Removes the file `name` of `dir` (a link is removed itself, never followed), telling
/// `private`; whether it was there.
pub(super) fn remove(dir: impl AsFd, name: &OsStr, private: &Private) -> std::io::Result<bool> {
    let dir = dir.as_fd();
    if let Ok(stat) = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        private.removed(stat.st_dev, stat.st_ino);
    }
    match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
        Ok(()) => Ok(true),
        Err(Errno::NOENT) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// The entries of `dir` (without `.` and `..`): each name and what it is (`Unknown` where the
/// filesystem does not say and a look without following cannot tell).
pub(super) fn entries(dir: impl AsFd) -> std::io::Result<Vec<(Vec<u8>, FileType)>> {
    let dir = dir.as_fd();
    let fd = rustix::fs::openat(dir, c".", folder_flags(), Mode::empty())?;
    let mut out = Vec::new();
    let mut listing = rustix::fs::Dir::read_from(&fd)?;
    while let Some(entry) = listing.read() {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let kind = match entry.file_type() {
            FileType::Unknown => rustix::fs::statat(dir, OsStr::from_bytes(name), AtFlags::SYMLINK_NOFOLLOW)
                .map_or(FileType::Unknown, |stat| FileType::from_raw_mode(stat.st_mode)),
            kind => kind,
        };
        out.push((name.to_vec(), kind));
    }
    Ok(out)
}
