//! The search listings: the regular files under a folder of a root as ripgrep would search
//! them (`.gitignore`, `.ignore` and `.git/info/exclude` honoured, also outside a git
//! repository; hidden files and folders skipped; symlinks never followed), walked beneath the
//! root's handle (see [`walker`]), kept warm per folder (see [`warm`]) with the trigram filters
//! of their files (see [`grams`]).
//!
//! [`Listings::list`] is the one place a search learns which files exist: a folder's listing is
//! kept warm and answers repeated searches without a walk, as long as its watches saw nothing
//! that could change it. The file context holds the listings beside the provider
//! ([`Listings::for_provider`]); nothing in the provider uses this module.
//! Opening a listed file is the provider's (see [`crate::provider::searched`]).
//!
//! Ignore files are read beneath the handle of the folder holding them, only at or below the
//! session's root: the ones of the folders between the root and the searched folder apply, and
//! none above the root (nor the user's global git excludes) is ever read (see [`rules`]).
//!
//! Kept listings and their filters are persisted in the search index on disk (see [`index`]),
//! so that a restarted daemon validates them instead of walking and reading every file again.

pub mod grams;
pub mod index;
pub mod judge;
mod listed;
pub mod rules;
pub mod stamp;
pub mod walker;
pub mod warm;

use std::path::Path;
use std::sync::Arc;

use self::grams::Grams;
pub use self::listed::{Listed, mtime_of};
pub use self::walker::{Dated, MAX_LISTED_BYTES, MAX_LISTED_FILES};
use self::warm::Filling;
pub use self::warm::Listings;
use crate::provider::{Provider, ProviderError, Resolved, Root, io_error};

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

impl Listings {
    /// Listings of `provider`'s files: at most its `max_search_cache_bytes` kept, their watches
    /// taken from its share of the user's watches.
    pub fn for_provider(provider: &Provider) -> Self {
        Self::new(provider.config().max_search_cache_bytes, Arc::clone(provider.watch_budget()))
    }

    /// The regular files under `base` (a folder, or one file), as ripgrep would search them:
    /// ignore files honoured, hidden entries skipped, symlinks neither followed nor listed.
    /// `stop` is asked every few entries; when it says so, the walk ends (`stopped`). A walk
    /// looks up the times of the files `dated` accepts (by their path relative to `base`; all
    /// when `None`); the others' are looked up when asked for ([`Listed::mtime_ns`]).
    pub fn list(
        &self,
        base: &Resolved,
        stop: &(dyn Fn() -> bool + Sync),
        dated: Option<&Dated<'_>>,
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
            let mtime_ns = i64::try_from(fp.mtime_ns).unwrap_or(i64::MAX);
            let files = Arc::new(vec![Listed::new(&base.rel, Some(mtime_ns))]);
            return Ok(Listing { root, files, truncated: false, stopped: false, grams: None });
        }
        // The root's index being validated may hold it: its folders validated are enough for a
        // search that dates the files it shows (a glob); one that reads them (a grep, dating
        // none) waits for their filters too.
        self.await_validation(&root, &base.rel, dated.is_none(), stop);
        if let Some((files, grams)) = self.get(&root, &base.rel) {
            if let Some(dated) = dated {
                self.dating.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                date_wanted(&root, &files, &base.rel, dated);
                self.dating.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            }
            return Ok(Listing { root, files, truncated: false, stopped: false, grams: Some(grams) });
        }
        // Each folder is watched before it is read: whatever changes during the walk spoils
        // the listing.
        let filling = self.start(&root, &base.rel);
        let hook = filling.as_ref().map(Filling::folder_hook);
        let record = (filling.is_some(), None);
        let walked = match walker::walk_with(&root, &base.rel, stop, hook.as_ref(), dated, record) {
            Ok(walked) => walked,
            Err(err) => {
                if let Some(filling) = filling {
                    self.abandon(filling);
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
        let records = (Arc::new(walked.folders), walked.way);
        let mut listing = Listing {
            root: root.clone(),
            files,
            truncated: walked.truncated,
            stopped: walked.stopped,
            grams: None,
        };
        if let Some(filling) = filling {
            if listing.truncated || listing.stopped {
                self.abandon(filling);
            } else {
                listing.grams = self.finish(filling, &root, &listing.files, walked.whitelists, records);
            }
        }
        Ok(listing)
    }
}

/// Dates the undated files of `files` (beneath the folder `rel` of `root`) that `dated` accepts
/// (by their path relative to `rel`), each beneath its folder's handle: a listing validated
/// from the search index holds its files undated until their stat data are compared.
fn date_wanted(root: &Root, files: &[Listed], rel: &Path, dated: &Dated<'_>) {
    use std::os::unix::ffi::OsStrExt as _;
    let skip = match rel.as_os_str().len() {
        0 => 0,
        len => len + 1,
    };
    let wanted: Vec<usize> = (0..files.len())
        .filter(|&index| {
            let file = &files[index];
            let bytes = file.rel.as_os_str().as_bytes();
            file.mtime_ns().is_none()
                && dated(Path::new(std::ffi::OsStr::from_bytes(&bytes[skip.min(bytes.len())..])))
        })
        .collect();
    for (index, stamp) in wanted.iter().zip(stamp::stamps_of(root, files, &wanted, None)) {
        if let Some(stamp) = stamp {
            files[*index].date(stamp.mtime_ns);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::searched::SearchContents;
    use crate::provider::{ProviderConfig, RootDir, Scope};
    use std::os::unix::fs::symlink;
    use std::path::Path;

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
        let listings = Listings::for_provider(&provider);
        let target = provider.resolve("src", scope).unwrap();
        let listing = listings.list(&target, &|| false, None).unwrap();
        let rels: Vec<_> = listing.files.iter().map(|f| f.rel.display().to_string()).collect();
        assert_eq!(rels, ["src/a.rs", "src/deep/b.rs"], "the root's .gitignore applies to src");
        match provider.open_listed(&handle, Path::new("src/a.rs"), 10, true, "a").unwrap() {
            SearchContents::Whole { bytes, seen } => {
                assert_eq!(bytes, b"a");
                assert!(provider.unchanged(&handle, Path::new("src/a.rs"), &seen.fingerprint));
            }
            other => panic!("small files are read whole and hashed: {other:?}"),
        }
        assert!(matches!(
            provider.open_listed(&handle, Path::new("src/a.rs"), 10, false, "a"),
            Ok(SearchContents::Bytes(bytes)) if bytes == b"a"
        ));
        assert!(matches!(
            provider.open_listed(&handle, Path::new("src/a.rs"), 0, true, "a"),
            Ok(SearchContents::Stream(_))
        ));
        assert!(provider.open_listed(&handle, Path::new("src/link"), 10, true, "l").is_err());
        assert!(!provider.is_listed_file(&handle, Path::new("src/link")));
        // A warm listing answers whole without walking; a cold walk stops when told.
        assert!(!listings.list(&target, &|| true, None).unwrap().stopped);
        listings.forget_all();
        assert!(listings.list(&target, &|| true, None).unwrap().stopped);
    }
}
