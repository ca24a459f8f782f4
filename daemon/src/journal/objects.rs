//! The journal's contents: the bytes of each version kept, once however many entries name it,
//! as one file per version under `objects/<first two hex digits>/<version>` (mode 0600),
//! written under a temporary name and renamed into place, so that a file under a version's name
//! is always whole. Reference-counted by the entries that name them; the last reference gone,
//! the file goes.

use std::collections::HashMap;
use std::fs::File;
use std::io::{ErrorKind, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::provider::Version;

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
    dir: PathBuf,
    fsync: bool,
    kept: HashMap<Version, Object>,
    bytes: u64,
}

impl Objects {
    /// The contents under `dir` (created, 0700, when missing); nothing counted yet.
    pub(super) fn open(dir: PathBuf, fsync: bool) -> std::io::Result<Self> {
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir)?;
        Ok(Self { dir, fsync, kept: HashMap::new(), bytes: 0 })
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

    fn path_of(&self, version: &Version) -> PathBuf {
        let hex = version.to_string();
        self.dir.join(&hex[..2]).join(hex)
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
        let path = self.path_of(&version);
        let dir = path.parent().unwrap_or(&self.dir);
        let fresh_dir = !dir.exists();
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
        let temp = dir.join(format!(".tmp-{}", crate::random::hex(8)?));
        let written = (|| {
            let mut file =
                std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&temp)?;
            file.write_all(bytes)?;
            if self.fsync {
                file.sync_data()?;
            }
            std::fs::rename(&temp, &path)?;
            if self.fsync {
                File::open(dir)?.sync_all()?;
                if fresh_dir {
                    File::open(&self.dir)?.sync_all()?;
                }
            }
            Ok(())
        })();
        if let Err(e) = written {
            let _ = std::fs::remove_file(&temp);
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
        if object.refs == 0 {
            self.bytes = self.bytes.saturating_sub(object.size);
            self.kept.remove(version);
            if let Err(e) = std::fs::remove_file(self.path_of(version))
                && e.kind() != ErrorKind::NotFound
            {
                tracing::warn!(%version, %e, "cannot remove a journal content no entry names");
            }
        }
    }

    /// The bytes of `version`: `None` when it is not kept, or its file is missing or damaged
    /// (its bytes no longer hash to it).
    pub(super) fn read(&self, version: &Version) -> std::io::Result<Option<Vec<u8>>> {
        if !self.holds(version) {
            return Ok(None);
        }
        match std::fs::read(self.path_of(version)) {
            Ok(bytes) if Version::of(&bytes) == *version => Ok(Some(bytes)),
            Ok(_) => {
                tracing::warn!(%version, "a journal content is damaged: its bytes no longer hash to its version");
                Ok(None)
            }
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Removes every file under the folder that no counted version names (contents of changes
    /// that never got their entry, temporary files of a crash): run once, after loading.
    pub(super) fn sweep(&self) -> usize {
        let mut removed = 0;
        let Ok(fans) = std::fs::read_dir(&self.dir) else { return 0 };
        for fan in fans.flatten() {
            let Ok(files) = std::fs::read_dir(fan.path()) else { continue };
            for file in files.flatten() {
                let name = file.file_name();
                let kept = name.to_str().and_then(Version::parse).is_some_and(|v| self.holds(&v));
                if !kept && remove(&file.path()) {
                    removed += 1;
                }
            }
        }
        removed
    }
}

fn remove(path: &Path) -> bool {
    std::fs::remove_file(path).is_ok()
}
