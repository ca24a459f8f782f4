//! The file context's side of searches (the `glob` and `grep` tools): the files under a folder
//! of the session's roots that the session may read (deny rules applied), opened beneath their
//! root's handle, and the record of a search that showed lines of a file, which counts as a
//! read of the version searched.

use std::path::{Path, PathBuf};

use super::deny::Access;
use super::{ContextError, FileContext};
use crate::provider::resolve::display;
use crate::provider::walk::{Contents, Listed, Seen};

pub use crate::provider::walk::{Contents as SearchContents, Seen as SearchSeen};

/// Largest file a search reads whole (so it can count as a read); bigger files are searched
/// as streams and never recorded.
pub const SEARCH_WHOLE_MAX_BYTES: u64 = 16 << 20;

/// One file a search may look at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchFile {
    /// Relative to its root.
    rel: PathBuf,
    /// Relative to the searched folder (for globs); the file's name when a file was named.
    pub under: PathBuf,
    /// As shown: relative to the cwd when inside it, else absolute (what `read` accepts).
    pub display: String,
    /// Modification time when listed, nanoseconds since the epoch.
    pub mtime_ns: i128,
    /// Size when listed.
    pub size: u64,
}

/// The files a search may look at.
#[derive(Debug, Clone)]
pub struct SearchFiles {
    /// The searched folder (or file), absolute.
    pub base: PathBuf,
    /// Whether a file (not a folder) was named.
    pub single: bool,
    /// The files, sorted by path.
    pub files: Vec<SearchFile>,
    /// Whether the listing stopped at its bound (more files exist).
    pub truncated: bool,
    root: crate::provider::Root,
}

impl FileContext<'_> {
    /// The files under `path` (default: the cwd) a search looks at: ignore files honoured,
    /// hidden entries skipped, symlinks never followed, deny rules for reads applied. `stop`
    /// is asked during the walk; when it says so, [`ContextError::Cancelled`].
    pub fn search_files(
        &self,
        path: Option<&str>,
        stop: &dyn Fn() -> bool,
    ) -> Result<SearchFiles, ContextError> {
        let target = self.target(path.unwrap_or("."), Access::Read)?;
        let listing = self.provider.list_files(&target, stop)?;
        if listing.stopped {
            return Err(ContextError::Cancelled { path: target.display });
        }
        let root = listing.root;
        let cwd = self.scope.cwd;
        let files = listing
            .files
            .iter()
            .filter(|f| self.deny.check(&f.rel, Access::Read).is_ok())
            .map(|&Listed { ref rel, mtime_ns, size }| {
                let rel = rel.clone();
                let under = match rel.strip_prefix(&target.rel) {
                    Ok(under) if !under.as_os_str().is_empty() => under.to_path_buf(),
                    _ => rel.file_name().map(PathBuf::from).unwrap_or_default(),
                };
                let display = display(&root.path().join(&rel), cwd);
                SearchFile { rel, under, display, mtime_ns, size }
            })
            .collect();
        Ok(SearchFiles {
            base: target.path,
            single: !target.folder,
            files,
            truncated: listing.truncated,
            root,
        })
    }

    /// Opens `file` for searching, beneath its root: with `whole` (a search that may count as a
    /// read), read whole and hashed up to [`SEARCH_WHOLE_MAX_BYTES`]; else, and for bigger
    /// files, as a stream.
    pub fn open_search_file(
        &self,
        files: &SearchFiles,
        file: &SearchFile,
        whole: bool,
    ) -> Result<Contents, ContextError> {
        let max = if whole { SEARCH_WHOLE_MAX_BYTES } else { 0 };
        Ok(self.provider.open_listed(&files.root, &file.rel, max, &file.display)?)
    }

    /// Whether `file` is still a regular file reached through no symlink (for listing it).
    pub fn still_listed(&self, files: &SearchFiles, file: &SearchFile) -> bool {
        self.provider.is_listed_file(&files.root, &file.rel)
    }

    /// Records that lines of `file`, read whole as `seen` with `bytes`, were shown to the
    /// session: a read of that version, when the file has not changed since (else nothing is
    /// recorded). Returns whether it was recorded.
    pub fn record_search(&self, files: &SearchFiles, file: &SearchFile, seen: &Seen, bytes: Vec<u8>) -> bool {
        if !self.provider.unchanged(&files.root, &file.rel, &seen.fingerprint) {
            return false;
        }
        let path: PathBuf = files.root.path().join(&file.rel);
        self.observed.record(Path::new(&path), seen.version, seen.links);
        let store = self.provider.store();
        if store.fits(bytes.len()) {
            store.put(seen.version, bytes);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::{Observations, Scope, Version};
    use crate::provider::{Provider, ProviderConfig, RootDir};

    #[test]
    fn a_search_lists_stops_and_records_only_unchanged_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join("src/a.rs"), "needle\n").unwrap();
        std::fs::write(root.join("b.txt"), "needle\n").unwrap();
        let roots = [RootDir::new(&root, None).unwrap()];
        let cwd = root.join("src");
        let scope = Scope { roots: &roots, cwd: &cwd };
        let provider = Provider::new(ProviderConfig::default());
        let observed = Observations::new(10);
        let ctx = FileContext::new(&provider, scope, &observed, false);

        let files = ctx.search_files(Some(".."), &|| false).unwrap();
        let shown: Vec<_> =
            files.files.iter().map(|f| (f.display.as_str(), f.under.to_str().unwrap())).collect();
        let b = root.join("b.txt").display().to_string();
        assert_eq!(shown, [(b.as_str(), "b.txt"), ("a.rs", "src/a.rs")], "shown as read accepts them");
        assert!(matches!(ctx.search_files(None, &|| true), Err(ContextError::Cancelled { .. })));

        let a = &files.files[1];
        let Ok(SearchContents::Whole { bytes, seen }) = ctx.open_search_file(&files, a, true) else {
            panic!()
        };
        assert_eq!(seen.version, Version::of(b"needle\n"));
        assert!(ctx.record_search(&files, a, &seen, bytes.clone()));
        assert_eq!(observed.get(&root.join("src/a.rs")), Some(seen.version));

        // Changed after the search: nothing is recorded.
        let b_file = &files.files[0];
        let Ok(SearchContents::Whole { bytes, seen }) = ctx.open_search_file(&files, b_file, true) else {
            panic!()
        };
        std::fs::write(root.join("b.txt"), "changed, longer\n").unwrap();
        assert!(!ctx.record_search(&files, b_file, &seen, bytes));
        assert_eq!(observed.get(&root.join("b.txt")), None);
    }
}
