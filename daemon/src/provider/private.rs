//! The daemon's own files, out of every session's reach whatever its roots: its private
//! folders (the state folder, the journal's, an index's) and private files (the gate and
//! staging tokens), by canonical path and by identity (device, inode).
//!
//! Three checks keep them out:
//! - a root at or inside a private folder (or naming a private file) is refused when opened
//!   ([`Private::containing`]);
//! - resolution never opens a name at or beneath a private folder or file inside a root: each
//!   root knows the private names beneath it ([`Private::beneath`], kept on the
//!   [`RootDir`](super::RootDir)), and the walk of a search skips them;
//! - a regular file with several hard links is refused when its (device, inode) is a private
//!   file's ([`Private::is_private_file`]): a hard link made inside a root leads to the same
//!   inode under another name. A file with one link can only be a private file under its own
//!   name, which the two checks above refuse already, so only linked files are looked up.
//!
//! The identities are gathered once, the first time a linked file is met, by listing the
//! private folders (never following a link) and looking at the private files; from then on the
//! daemon's own writers ([`Private::created`], [`Private::removed`]) keep them current, under
//! the same lock, so a file made while the list is gathered is never missed.

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

/// Most identities gathered from one private folder tree (the journal keeps at most about
/// twice its 100,000 entries' versions): a bound on the memory of the set, 16 bytes each.
const MAX_IDENTITIES: usize = 1 << 20;
/// Deepest folder nesting listed beneath a private folder (the journal's is two deep).
const MAX_DEPTH: usize = 4;

/// The daemon's private folders and files.
#[derive(Debug, Default)]
pub struct Private {
    /// Canonical paths of private folders: nothing at or beneath them is served.
    folders: Vec<PathBuf>,
    /// Canonical paths of private files.
    files: Vec<PathBuf>,
    /// (device, inode) of every private file; `None` until first needed.
    identities: Mutex<Option<HashSet<(u64, u64)>>>,
}

impl Private {
    /// Nothing private (tests and library use without a journal or tokens).
    pub fn none() -> Arc<Self> {
        Arc::default()
    }

    /// The private `folders` and `files` (each canonicalised when it exists; kept as given
    /// otherwise, so a folder made later is still fenced by its path).
    pub fn new(folders: &[PathBuf], files: &[PathBuf]) -> Arc<Self> {
        let canonical = |paths: &[PathBuf]| -> Vec<PathBuf> {
            let mut out: Vec<PathBuf> = Vec::new();
            for path in paths.iter().filter(|p| p.is_absolute()) {
                let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.components().collect());
                if !out.contains(&path) {
                    out.push(path);
                }
            }
            out
        };
        Arc::new(Self { folders: canonical(folders), files: canonical(files), identities: Mutex::default() })
    }

    /// The private folders, canonical.
    pub fn folders(&self) -> &[PathBuf] {
        &self.folders
    }

    /// The private folder or file that `path` (canonical) is, or lies beneath.
    pub fn containing(&self, path: &Path) -> Option<&Path> {
        self.folders
            .iter()
            .find(|folder| path.starts_with(folder))
            .or_else(|| self.files.iter().find(|file| path == file.as_path()))
            .map(PathBuf::as_path)
    }

    /// The private folders and files inside `root` (canonical), relative to it: the names a
    /// session rooted there may never reach.
    pub fn beneath(&self, root: &Path) -> Box<[PathBuf]> {
        self.folders
            .iter()
            .chain(&self.files)
            .filter_map(|private| private.strip_prefix(root).ok())
            .filter(|rel| !rel.as_os_str().is_empty())
            .map(Path::to_path_buf)
            .collect()
    }

    /// Whether the file of `meta` is one of the daemon's private files. Only a file with
    /// several links needs asking (see the module's doc); the identities are gathered at the
    /// first question.
    pub fn is_private_file(&self, meta: &std::fs::Metadata) -> bool {
        if self.folders.is_empty() && self.files.is_empty() {
            return false;
        }
        let mut identities = self.identities.lock().unwrap_or_else(PoisonError::into_inner);
        let known = identities.get_or_insert_with(|| self.gather());
        known.contains(&(meta.dev(), meta.ino()))
    }

    /// A private file the daemon just made (dev, inode), once the identities are gathered.
    pub fn created(&self, dev: u64, ino: u64) {
        let mut identities = self.identities.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(known) = identities.as_mut()
            && known.len() < MAX_IDENTITIES
        {
            known.insert((dev, ino));
        }
    }

    /// A private file the daemon removed.
    pub fn removed(&self, dev: u64, ino: u64) {
        let mut identities = self.identities.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(known) = identities.as_mut() {
            known.remove(&(dev, ino));
        }
    }

    /// Lists every file beneath the private folders (no link followed) and looks at the
    /// private files.
    fn gather(&self) -> HashSet<(u64, u64)> {
        let mut found = HashSet::new();
        for file in &self.files {
            if let Ok(meta) = std::fs::symlink_metadata(file)
                && meta.is_file()
            {
                found.insert((meta.dev(), meta.ino()));
            }
        }
        for folder in &self.folders {
            gather_in(folder, 0, &mut found);
        }
        tracing::debug!(files = found.len(), "the daemon's private files gathered");
        found
    }
}

/// Adds the identities of the files beneath `folder` (links neither followed nor counted).
fn gather_in(folder: &Path, depth: usize, found: &mut HashSet<(u64, u64)>) {
    let Ok(entries) = std::fs::read_dir(folder) else { return };
    for entry in entries.flatten() {
        if found.len() >= MAX_IDENTITIES {
            return;
        }
        let Ok(kind) = entry.file_type() else { continue };
        if kind.is_dir() && depth < MAX_DEPTH {
            gather_in(&entry.path(), depth + 1, found);
        } else if kind.is_file()
            && let Ok(meta) = entry.metadata()
        {
            found.insert((meta.dev(), meta.ino()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_at_or_beneath_a_private_folder_and_linked_files_are_known() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let journal = base.join("state/journal");
        std::fs::create_dir_all(journal.join("objects/ab")).unwrap();
        std::fs::write(journal.join("objects/ab/abcd"), "secret").unwrap();
        std::fs::write(base.join("token"), "t").unwrap();
        std::fs::create_dir_all(base.join("root")).unwrap();
        std::fs::hard_link(journal.join("objects/ab/abcd"), base.join("root/copy")).unwrap();
        std::fs::hard_link(base.join("token"), base.join("root/t")).unwrap();
        std::fs::write(base.join("root/plain"), "p").unwrap();
        let private = Private::new(std::slice::from_ref(&journal), &[base.join("token")]);

        assert_eq!(private.containing(&journal), Some(journal.as_path()));
        assert_eq!(private.containing(&journal.join("objects")), Some(journal.as_path()));
        assert_eq!(private.containing(&base.join("state")), None);
        assert_eq!(private.containing(&base.join("state/journal-x")), None, "component-wise");
        assert_eq!(private.containing(&base.join("token")), Some(base.join("token").as_path()));
        assert_eq!(&*private.beneath(&base), [PathBuf::from("state/journal"), PathBuf::from("token")]);
        assert!(private.beneath(&base.join("root")).is_empty());

        let meta = |p: &str| std::fs::metadata(base.join(p)).unwrap();
        assert!(private.is_private_file(&meta("root/copy")), "a link to a journal file");
        assert!(private.is_private_file(&meta("root/t")), "a link to a token");
        assert!(!private.is_private_file(&meta("root/plain")));
        // Made after the identities were gathered: told by its maker.
        std::fs::write(journal.join("objects/ab/new"), "n").unwrap();
        std::fs::hard_link(journal.join("objects/ab/new"), base.join("root/new")).unwrap();
        assert!(!private.is_private_file(&meta("root/new")));
        let made = meta("root/new");
        private.created(made.dev(), made.ino());
        assert!(private.is_private_file(&meta("root/new")));
        private.removed(made.dev(), made.ino());
        assert!(!private.is_private_file(&meta("root/new")));
        assert!(!Private::none().is_private_file(&meta("root/copy")));
    }
}
