//! The journal's contents: the bytes of each version kept, once however many entries name it,
//! as one file per version under `objects/<first two hex digits>/<version>` (mode 0600),
//! written under a temporary name and renamed into place, so that a file under a version's name
//! is always whole. Reference-counted by the entries that name them; the last reference gone,
//! the file goes. Every file and folder is opened beneath the `objects` folder's handle without
//! following links (see [`files`](super::files)): a link planted there is never read, written
//! through or swept through.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::File;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt as _;
use std::sync::Arc;

use rustix::fs::{FileType, Mode, OFlags};

use super::files;
use crate::provider::Version;
use crate::provider::private::Private;

/// One kept version.
#[derive(Debug, Clone, Copy)]
struct Object {
    /// Its bytes.
    size: u64,
    /// Entries naming it.
    refs: u32,
}

/// The kept versions.
#[derive(Debug)]
pub(super) struct Objects {
    /// The `objects` folder.
    dir: OwnedFd,
    fsync: bool,
    kept: HashMap<Version, Object>,
    bytes: u64,
    /// The daemon's private files, told of each file made and removed.
    private: Arc<Private>,
}

/// A version's fan folder name and file name.
fn names(version: &Version) -> (String, String) {
    let hex = version.to_string();
    (hex[..2].to_owned(), hex)
}

impl Objects {
    /// The contents under the folder `objects` of the journal folder `journal` (created, 0700,
    /// when missing); nothing counted yet.
    pub(super) fn open(journal: &OwnedFd, fsync: bool, private: Arc<Private>) -> std::io::Result<Self> {
        let (dir, _) = files::make_subfolder(journal, OsStr::new("objects"))?;
        Ok(Self { dir, fsync, kept: HashMap::new(), bytes: 0, private })
    }

    /// Bytes of the versions kept.
    pub(super) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The size of `version`, when kept.
    pub(super) fn size(&self, version: &Version) -> Option<u64> {
        self.kept.get(version).map(|object| object.size)
    }

    /// Whether `version` is kept.
    pub(super) fn holds(&self, version: &Version) -> bool {
        self.kept.contains_key(version)
    }

    /// Counts one more reference to `version`, already on disk with `size` bytes (a journal
    /// being loaded).
    pub(super) fn count(&mut self, version: Version, size: u64) {
        let object = self.kept.entry(version).or_insert(Object { size, refs: 0 });
        if object.refs == 0 {
            self.bytes += size;
        }
        object.refs += 1;
    }

    /// Keeps `bytes` as `version` (written when not kept yet) and counts a reference to it.
    pub(super) fn keep(&mut self, version: Version, bytes: &[u8]) -> std::io::Result<()> {
        if let Some(object) = self.kept.get_mut(&version) {
            object.refs += 1;
            return Ok(());
        }
        let (fan, name) = names(&version);
        let (fan_dir, fresh) = files::make_subfolder(&self.dir, OsStr::new(&fan))?;
        let temp = format!(".tmp-{}", crate::random::hex(8)?);
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let written = (|| -> std::io::Result<()> {
            let fd = rustix::fs::openat(&fan_dir, temp.as_str(), flags, Mode::from_raw_mode(0o600))?;
            let mut file = File::from(fd);
            file.write_all(bytes)?;
            if self.fsync {
                file.sync_data()?;
            }
            let stat = rustix::fs::fstat(&file)?;
            self.private.created(stat.st_dev, stat.st_ino);
            rustix::fs::renameat(&fan_dir, temp.as_str(), &fan_dir, name.as_str())?;
            if self.fsync {
                rustix::fs::fsync(&fan_dir)?;
                if fresh {
                    rustix::fs::fsync(&self.dir)?;
                }
            }
            Ok(())
        })();
        if let Err(e) = written {
            let _ = files::remove(&fan_dir, OsStr::new(&temp), &self.private);
            return Err(e);
        }
        self.kept.insert(version, Object { size: bytes.len() as u64, refs: 1 });
        self.bytes += bytes.len() as u64;
        Ok(())
    }

    /// Drops one reference to `version`; the last one removes its file.
    pub(super) fn release(&mut self, version: &Version) {
        let Some(object) = self.kept.get_mut(version) else { return };
        object.refs = object.refs.saturating_sub(1);
        if object.refs > 0 {
            return;
        }
        self.bytes = self.bytes.saturating_sub(object.size);
        self.kept.remove(version);
        let (fan, name) = names(version);
        let removed = files::subfolder(&self.dir, OsStr::new(&fan)).and_then(|fan| {
            fan.map_or(Ok(false), |fan| files::remove(&fan, OsStr::new(&name), &self.private))
        });
        if let Err(e) = removed {
            tracing::warn!(%version, %e, "cannot remove a journal content no entry names");
        }
    }

    /// The bytes of `version`: `None` when it is not kept, or its file is missing or damaged
    /// (its bytes no longer hash to it).
    pub(super) fn read(&self, version: &Version) -> std::io::Result<Option<Vec<u8>>> {
        let Some(object) = self.kept.get(version) else { return Ok(None) };
        let (fan, name) = names(version);
        let Some(fan) = files::subfolder(&self.dir, OsStr::new(&fan)).or_else(gone)? else { return Ok(None) };
        match files::read_regular(&fan, OsStr::new(&name), object.size)? {
            Some(bytes) if Version::of(&bytes) == *version => Ok(Some(bytes)),
            Some(_) => {
                tracing::warn!(%version, "a journal content is damaged: its bytes no longer hash to its version");
                Ok(None)
            }
            None => Ok(None),
        }
    }

    /// Removes every file under the folder that no counted version names (contents of changes
    /// that never got their entry, temporary files of a crash): run once, after loading. A link
    /// found there is removed itself, never followed; anything else unknown is left alone.
    pub(super) fn sweep(&self) -> usize {
        let mut removed = 0;
        let Ok(fans) = files::entries(&self.dir) else { return 0 };
        for (fan_name, kind) in fans {
            let fan_name = OsStr::from_bytes(&fan_name);
            if kind != FileType::Directory {
                tracing::warn!(name = %fan_name.to_string_lossy(), "the journal's objects folder holds something that is no folder of its own: left alone");
                continue;
            }
            let Ok(Some(fan)) = files::subfolder(&self.dir, fan_name) else { continue };
            let Ok(entries) = files::entries(&fan) else { continue };
            for (name, kind) in entries {
                let kept = std::str::from_utf8(&name)
                    .ok()
                    .and_then(Version::parse)
                    .is_some_and(|v| kind == FileType::RegularFile && self.holds(&v));
                if kept || kind == FileType::Directory {
                    continue;
                }
                if files::remove(&fan, OsStr::from_bytes(&name), &self.private).unwrap_or(false) {
                    removed += 1;
                }
            }
        }
        removed
    }
}

/// A fan folder that is not a folder (a planted link, a file) holds nothing of the journal's.
fn gone(e: std::io::Error) -> std::io::Result<Option<OwnedFd>> {
    match e.raw_os_error() {
        Some(code)
            if code == rustix::io::Errno::LOOP.raw_os_error()
                || code == rustix::io::Errno::NOTDIR.raw_os_error() =>
        {
            Ok(None)
        }
        _ => Err(e),
    }
}
