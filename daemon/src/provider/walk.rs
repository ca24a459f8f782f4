//! Listing the regular files under a folder of a root as ripgrep would search them
//! (`.gitignore`, `.ignore` and `.git/info/exclude` honoured, also outside a git repository;
//! hidden files and folders skipped; symlinks never followed), walked beneath the root's
//! handle (see [`walker`](super::walker)), and opening a listed file for reading beneath its
//! root's handle, so that a symlink swapped in after the walk is refused, never followed.
//!
//! [`Provider::list_files`] is the one place a search learns which files exist: a folder's
//! listing is kept warm (see [`listings`](super::listings)) and answers repeated searches
//! without a walk, as long as its watcher saw nothing that could change it.
//!
//! Ignore files are read beneath the handle of the folder holding them, only at or below the
//! session's root: the ones of the folders between the root and the searched folder apply, and
//! none above the root (nor the user's global git excludes) is ever read (see
//! [`rules`](super::rules)).

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::beneath::{Root, RootDir};
use super::error::io_error;
use super::grams::Grams;
use super::listings::Filling;
use super::resolve::Resolved;
pub use super::walker::{FolderHook, MAX_LISTED_BYTES, MAX_LISTED_FILES, Watch};
use super::{Fingerprint, Provider, ProviderError, Version};

/// One regular file of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// Relative to the root.
    pub rel: PathBuf,
    /// Modification time when listed, nanoseconds since the epoch.
    pub mtime_ns: i128,
    /// Size when listed.
    pub size: u64,
}

/// The files under a folder (or the one file named).
#[derive(Debug, Clone)]
pub struct Listing {
    /// The root every file is beneath.
    pub root: Root,
    /// The files, sorted by path (shared with the kept listing: a warm search copies nothing).
    pub files: Arc<Vec<Listed>>,
    /// Whether the walk stopped at [`MAX_LISTED_FILES`] or [`MAX_LISTED_BYTES`].
    pub truncated: bool,
    /// Whether the caller's stop flag ended the walk early.
    pub stopped: bool,
    /// The trigram filters of the files, when the listing is kept warm.
    pub grams: Option<Arc<Grams>>,
}

/// A listed file opened for a search.
#[derive(Debug)]
pub enum Contents {
    /// Small enough to hold: its bytes, and what identifies the version searched.
    Whole {
        /// The file's bytes.
        bytes: Vec<u8>,
        /// Its version and fingerprint when read.
        seen: Seen,
    },
    /// Small enough to hold, read without hashing (a search that records nothing).
    Bytes(Vec<u8>),
    /// Too big to hold: searched from the open file, never recorded.
    Stream(File),
}

/// What a whole read of a listed file saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    /// blake3 of the bytes read.
    pub version: Version,
    /// The open file's fingerprint.
    pub fingerprint: Fingerprint,
    /// Its hard links.
    pub links: u64,
}

pub(super) fn ns(secs: i64, nsec: i64) -> i128 {
    i128::from(secs) * 1_000_000_000 + i128::from(nsec)
}

impl Provider {
    /// The regular files under `base` (a folder, or one file), as ripgrep would search them:
    /// ignore files honoured, hidden entries skipped, symlinks neither followed nor listed.
    /// `stop` is asked every few entries; when it says so, the walk ends (`stopped`).
    pub fn list_files(
        &self,
        base: &Resolved,
        stop: &(dyn Fn() -> bool + Sync),
    ) -> Result<Listing, ProviderError> {
        let root = base.dir.clone();
        if !base.exists {
            return Err(ProviderError::NotFound { path: base.display.clone(), why: None });
        }
        if !base.folder {
            let Some(found) = base.file else {
                return Err(ProviderError::NotRegularFile { path: base.display.clone() });
            };
            let fp = found.fingerprint;
            let files =
                Arc::new(vec![Listed { rel: base.rel.clone(), mtime_ns: fp.mtime_ns, size: fp.size }]);
            return Ok(Listing { root, files, truncated: false, stopped: false, grams: None });
        }
        if let Some((files, grams)) = self.listings.get(&root, &base.rel) {
            return Ok(Listing { root, files, truncated: false, stopped: false, grams: Some(grams) });
        }
        // Each folder is watched before it is read: whatever changes during the walk spoils
        // the listing.
        let filling = self.listings.start(&root, &base.rel);
        let hook = filling.as_ref().map(Filling::folder_hook);
        let walked = match super::walker::walk(&root, &base.rel, stop, hook.as_ref()) {
            Ok(walked) => walked,
            Err(err) => {
                if let Some(filling) = filling {
                    self.listings.abandon(filling);
                }
                // Resolution found a folder there: one that is no folder now (a link, a file)
                // was replaced meanwhile.
                let err = if err.raw_os_error() == Some(rustix::io::Errno::NOTDIR.raw_os_error()) {
                    rustix::io::Errno::LOOP.into()
                } else {
                    err
                };
                return Err(io_error(&base.display, "open", err));
            }
        };
        let files = Arc::new(walked.files);
        let mut listing = Listing {
            root: root.clone(),
            files,
            truncated: walked.truncated,
            stopped: walked.stopped,
            grams: None,
        };
        if let Some(filling) = filling {
            if listing.truncated || listing.stopped {
                self.listings.abandon(filling);
            } else {
                listing.grams = self.listings.finish(filling, &root, &listing.files);
            }
        }
        Ok(listing)
    }

    /// Listings kept warm and their bytes, for `daemon/status`.
    pub fn cached_listings(&self) -> (usize, usize) {
        self.listings.stats()
    }

    /// Drops the warm listings `path` may be part of (a change there was reported).
    pub fn forget_listings(&self, path: &Path) {
        self.listings.forget(path);
    }

    /// Drops every warm listing (events were lost).
    pub fn forget_all_listings(&self) {
        self.listings.forget_all();
    }

    /// Opens the listed file `rel` for reading beneath `root` (a symlink met anywhere on the
    /// way is refused): whole when it holds at most `whole_max` bytes (with `hash`, hashed,
    /// with its fingerprint: [`Contents::Whole`]; else [`Contents::Bytes`]), else as an open
    /// file. `shown` names it in errors.
    pub fn open_listed(
        &self,
        root: &RootDir,
        rel: &Path,
        whole_max: u64,
        hash: bool,
        shown: &str,
    ) -> Result<Contents, ProviderError> {
        let mut file = root.open_read(rel).map_err(|e| io_error(shown, "open", e))?;
        let meta = file.metadata().map_err(|e| io_error(shown, "stat", e))?;
        if !meta.is_file() {
            return Err(ProviderError::NotRegularFile { path: shown.to_owned() });
        }
        if meta.len() > whole_max {
            return Ok(Contents::Stream(file));
        }
        let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
        (&mut file).take(whole_max + 1).read_to_end(&mut bytes).map_err(|e| io_error(shown, "read", e))?;
        if bytes.len() as u64 > whole_max {
            // It grew meanwhile: search it as a stream from the start.
            file.seek(SeekFrom::Start(0)).map_err(|e| io_error(shown, "seek", e))?;
            return Ok(Contents::Stream(file));
        }
        if !hash {
            return Ok(Contents::Bytes(bytes));
        }
        let after = file.metadata().map_err(|e| io_error(shown, "stat", e))?;
        self.hashed.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        let seen =
            Seen { version: Version::of(&bytes), fingerprint: Fingerprint::of(&meta), links: after.nlink() };
        if Fingerprint::of(&after) != seen.fingerprint {
            // Changed while read: search it, but nothing ties these bytes to one version.
            file.seek(SeekFrom::Start(0)).map_err(|e| io_error(shown, "seek", e))?;
            return Ok(Contents::Stream(file));
        }
        Ok(Contents::Whole { bytes, seen })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::{ProviderConfig, Scope};
    use std::os::unix::fs::symlink;

    #[test]
    fn lists_like_ripgrep_and_opens_only_beneath_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let root = base.join("root");
        std::fs::create_dir_all(root.join("src/deep")).unwrap();
        std::fs::create_dir_all(root.join(".hidden")).unwrap();
        std::fs::write(root.join(".gitignore"), "ignored/\n*.log\n").unwrap();
        std::fs::create_dir_all(root.join("src/ignored")).unwrap();
        std::fs::write(root.join("src/ignored/x.rs"), "x").unwrap();
        std::fs::write(root.join("src/a.rs"), "a").unwrap();
        std::fs::write(root.join("src/a.log"), "a").unwrap();
        std::fs::write(root.join("src/deep/b.rs"), "b").unwrap();
        std::fs::write(root.join(".hidden/c.rs"), "c").unwrap();
        std::fs::write(base.join("secret"), "s").unwrap();
        symlink(base.join("secret"), root.join("src/link")).unwrap();
        let handle = RootDir::new(&root, None).unwrap();
        let roots = [handle.clone()];
        let scope = Scope { roots: &roots, cwd: &root };
        let provider = Provider::new(ProviderConfig::default());
        let target = provider.resolve("src", scope).unwrap();
        let listing = provider.list_files(&target, &|| false).unwrap();
        let rels: Vec<_> = listing.files.iter().map(|f| f.rel.display().to_string()).collect();
        assert_eq!(rels, ["src/a.rs", "src/deep/b.rs"], "the root's .gitignore applies to src");
        match provider.open_listed(&handle, Path::new("src/a.rs"), 10, true, "a").unwrap() {
            Contents::Whole { bytes, seen } => {
                assert_eq!(bytes, b"a");
                assert!(provider.unchanged(&handle, Path::new("src/a.rs"), &seen.fingerprint));
            }
            other => panic!("small files are read whole and hashed: {other:?}"),
        }
        assert!(matches!(
            provider.open_listed(&handle, Path::new("src/a.rs"), 10, false, "a"),
            Ok(Contents::Bytes(bytes)) if bytes == b"a"
        ));
        assert!(matches!(
            provider.open_listed(&handle, Path::new("src/a.rs"), 0, true, "a"),
            Ok(Contents::Stream(_))
        ));
        assert!(provider.open_listed(&handle, Path::new("src/link"), 10, true, "l").is_err());
        assert!(!provider.is_listed_file(&handle, Path::new("src/link")));
        // A warm listing answers whole without walking; a cold walk stops when told.
        assert!(!provider.list_files(&target, &|| true).unwrap().stopped);
        provider.forget_all_listings();
        assert!(provider.list_files(&target, &|| true).unwrap().stopped);
    }
}
