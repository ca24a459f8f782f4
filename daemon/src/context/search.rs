//! The file context's side of searches (the `glob` and `grep` tools): the files under a folder
//! of the session's roots that the session may read (deny rules applied), opened beneath their
//! root's handle, and the record of a search that showed lines of a file, which counts as a
//! read of the version searched.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::deny::Access;
use super::{ContextError, FileContext, Private, ProviderError, Root};
pub use crate::listing::Dated;
use crate::listing::Listed;
use crate::listing::grams::Grams;
use crate::provider::resolve::display;

pub use crate::provider::searched::{BINARY_BYTE, BINARY_PEEK, SearchContents, SearchSeen, is_binary};

pub use crate::search::{Needles, SEARCH_WHOLE_MAX_BYTES};

/// One file a search shows or reads: built only for the files a search keeps, so a warm
/// search of a big tree allocates nothing per skipped file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchFile {
    /// Its position in the listing.
    index: usize,
    /// As shown: relative to the cwd when inside it, else absolute (what `read` accepts).
    pub display: String,
}

/// What listing a search's files gave: the files, or that its `stop` said stop first.
#[derive(Debug)]
pub enum FilesListed {
    /// The files.
    Files(SearchFiles),
    /// Stopped while listing them, under `path` (as the session is shown it); the caller knows
    /// why (cancelled, or out of time).
    Stopped {
        /// The folder whose listing stopped.
        path: String,
    },
}

/// The files a search may look at: the folder's listing (shared with the warm copy, never
/// copied), read through [`FileContext::search_file`], which applies the deny rules.
#[derive(Debug, Clone)]
pub struct SearchFiles {
    /// The searched folder (or file), absolute.
    pub base: PathBuf,
    /// Whether a file (not a folder) was named.
    pub single: bool,
    /// Whether the listing stopped at its bound (more files exist).
    pub truncated: bool,
    /// The searched folder (or file), relative to its root.
    target: PathBuf,
    listed: Arc<Vec<Listed>>,
    root: crate::provider::Root,
    /// The listing's trigram filters, when it is kept warm.
    grams: Option<Arc<Grams>>,
}

impl SearchFiles {
    /// How many files were listed.
    pub fn len(&self) -> usize {
        self.listed.len()
    }

    /// Whether nothing was listed.
    pub fn is_empty(&self) -> bool {
        self.listed.is_empty()
    }

    /// For each listed file, whether a search needing `needles` must read it (with no
    /// `needles`, every file but the binary ones): `None` when the listing has no filters and
    /// every file must be read. When it is
    /// `Some`, it has exactly [`len`](Self::len) entries.
    pub fn must_read(&self, needles: &Needles) -> Option<Vec<bool>> {
        // Without literals, the filters still skip the binary files.
        Some(self.grams.as_ref()?.must_read(&needles.0)).filter(|m| m.len() == self.listed.len())
    }

    /// Starts building, off the request path, the trigram filters a later search of this
    /// listing skips files with (when it is kept warm and some are missing).
    pub fn fill_filters(&self) {
        if let Some(grams) = &self.grams {
            grams.fill(&self.root, &self.listed, SEARCH_WHOLE_MAX_BYTES);
        }
    }

    /// Modification time of listed file `index` as last seen, nanoseconds since the epoch:
    /// looked up beneath the root the first time it is asked for (a walk dates only the files
    /// its search wanted), and 0 when it cannot be (gone: never shown).
    pub fn mtime_ns(&self, index: usize) -> i64 {
        let listed = &self.listed[index];
        listed.mtime_ns().unwrap_or_else(|| {
            match self.root.open_path(&listed.rel).and_then(|file| file.metadata()) {
                Ok(meta) => listed.date(crate::listing::mtime_of(&meta)),
                Err(_) => 0,
            }
        })
    }

    /// [`mtime_ns`](Self::mtime_ns) of a file the search shows.
    pub fn mtime_of(&self, file: &SearchFile) -> i64 {
        self.mtime_ns(file.index)
    }

    /// Listed file `index` relative to the searched folder (its name when a file was named).
    pub fn under(&self, index: usize) -> &Path {
        use std::os::unix::ffi::OsStrExt as _;
        let rel = &self.listed[index].rel;
        // By bytes: listed paths and the target are both relative to the root and normal (no
        // `.`, no doubled or trailing `/`), and `Path::strip_prefix`, component by component,
        // was most of a repeated glob of a big tree.
        let (bytes, target) = (rel.as_os_str().as_bytes(), self.target.as_os_str().as_bytes());
        let under = match target {
            b"" | b"." => bytes,
            _ if bytes.len() > target.len() + 1
                && bytes.starts_with(target)
                && bytes[target.len()] == b'/' =>
            {
                &bytes[target.len() + 1..]
            }
            _ => return rel.file_name().map_or(&**rel, Path::new),
        };
        Path::new(std::ffi::OsStr::from_bytes(under))
    }
}

/// The search index of the service's listings (see [`crate::listing::index`]).
impl super::Files {
    /// The same service keeping its search listings in the index `config` names (see
    /// [`crate::listing::index`]); without one when its folder cannot be opened (logged).
    pub fn with_search_index(
        self,
        config: &crate::listing::index::IndexConfig,
        private: Arc<Private>,
    ) -> Self {
        match crate::listing::index::Indexes::open(config, private) {
            Ok(indexes) => self.listings.use_index(Arc::new(indexes)),
            Err(err) => tracing::warn!(
                dir = %config.dir.display(),
                %err,
                "no search index: searches after a restart walk and read every file again"
            ),
        }
        self
    }

    /// Starts loading and validating, in the background, the search index of each of `roots`
    /// (a session named them), so its first search is warm.
    pub fn prepare_search(&self, roots: &[Root]) {
        for root in roots {
            self.listings.prepare(root);
        }
    }

    /// Writes the search index of every root whose kept listings changed since (at a clean
    /// stop; blocking); the roots written.
    pub fn persist_search_indexes(&self) -> usize {
        self.listings.persist_all()
    }

    /// What is known of each root's search index: (root, loaded from disk, files re-read at
    /// validation, bytes on disk).
    pub fn search_indexes(&self) -> Vec<(std::path::PathBuf, crate::listing::index::RootIndex)> {
        self.listings.index_roots()
    }
}

impl FileContext<'_> {
    /// The files under `path` (default: the cwd) a search looks at: ignore files honoured,
    /// hidden entries skipped, symlinks never followed. `stop` is asked during the walk; when
    /// it says so, [`FilesListed::Stopped`]. A walk dates the files `dated` accepts (see
    /// [`Dated`]; all when `None`). The deny rules apply per file, in
    /// [`search_file`](Self::search_file).
    pub(super) fn search_files(
        &self,
        path: Option<&str>,
        stop: &(dyn Fn() -> bool + Sync),
        dated: Option<&Dated<'_>>,
    ) -> Result<FilesListed, ContextError> {
        let target = self.target(path.unwrap_or("."), Access::Read)?;
        let listing = self.listings.list(&target, stop, dated)?;
        // Tests widen here the window in which a change drops the listing under the search.
        #[cfg(feature = "failpoints")]
        fail::fail_point!("search::listed");
        if listing.stopped {
            return Ok(FilesListed::Stopped { path: target.display });
        }
        Ok(FilesListed::Files(SearchFiles {
            base: target.path,
            single: !target.folder,
            truncated: listing.truncated,
            target: target.rel,
            listed: listing.files,
            root: listing.root,
            grams: listing.grams,
        }))
    }

    /// Whether a deny rule hides listed file `index` from this session (cheaper than
    /// [`search_file`](Self::search_file), which also builds the path shown).
    pub(super) fn search_hidden(&self, files: &SearchFiles, index: usize) -> bool {
        self.deny.check(&files.listed[index].rel, Access::Read).is_err()
    }

    /// Listed file `index` as the search shows it, or `None` when a deny rule hides it from
    /// this session.
    pub(super) fn search_file(&self, files: &SearchFiles, index: usize) -> Option<SearchFile> {
        let rel = &files.listed[index].rel;
        self.deny.check(rel, Access::Read).ok()?;
        let display = display(&files.root.path().join(rel), self.scope.cwd);
        Some(SearchFile { index, display })
    }

    /// Opens `file` for searching, beneath its root: with `whole` (a search that may count as a
    /// read), read whole and hashed up to [`SEARCH_WHOLE_MAX_BYTES`]; else, and for bigger
    /// files, as a stream.
    pub(super) fn open_search_file(
        &self,
        files: &SearchFiles,
        file: &SearchFile,
        whole: bool,
    ) -> Result<SearchContents, ContextError> {
        let max = if whole { SEARCH_WHOLE_MAX_BYTES } else { 0 };
        let contents = self.provider.open_listed(
            &files.root,
            &files.listed[file.index].rel,
            max,
            true,
            &file.display,
        )?;
        self.one_name_opened(&file.display, &contents)?;
        Ok(contents)
    }

    /// Opens `file` for a search that records nothing: read whole (unhashed) up to
    /// [`SEARCH_WHOLE_MAX_BYTES`], bigger files as a stream. While deny rules for reads apply,
    /// read whole is hashed too, for the links of the descriptor it was read from: a file with
    /// several names is refused (see [`FileContext::one_name`]).
    pub(super) fn open_search_bytes(
        &self,
        files: &SearchFiles,
        file: &SearchFile,
    ) -> Result<SearchContents, ContextError> {
        let rel = &files.listed[file.index].rel;
        let checked = self.deny.applies(Access::Read);
        let contents =
            self.provider.open_listed(&files.root, rel, SEARCH_WHOLE_MAX_BYTES, checked, &file.display)?;
        if !checked {
            return Ok(contents);
        }
        self.one_name_opened(&file.display, &contents)?;
        Ok(contents)
    }

    /// Refuses a searched file with several hard links while deny rules for reads apply,
    /// judged on the descriptor it was read from.
    fn one_name_opened(&self, display: &str, contents: &SearchContents) -> Result<(), ContextError> {
        if !self.deny.applies(Access::Read) {
            return Ok(());
        }
        let links = match contents {
            SearchContents::Whole { seen, .. } => seen.links,
            SearchContents::Stream(file) => {
                use std::os::unix::fs::MetadataExt as _;
                let meta = file.metadata().map_err(|source| ProviderError::Io {
                    path: display.to_owned(),
                    op: "stat",
                    source,
                })?;
                meta.nlink()
            }
            // Unhashed bytes carry no links: never asked for while the rules apply.
            SearchContents::Bytes(_) | SearchContents::Binary => {
                return Err(ProviderError::Refused {
                    path: display.to_owned(),
                    why: "its hard links could not be checked against the deny rules".into(),
                }
                .into());
            }
        };
        self.one_name(display, links, Access::Read)
    }

    /// Whether `file` is still a regular file reached through no symlink (for listing it).
    pub(super) fn still_listed(&self, files: &SearchFiles, file: &SearchFile) -> bool {
        self.provider.is_listed_file(&files.root, &files.listed[file.index].rel)
    }

    /// Records that lines of `file`, read whole as `seen` with `bytes`, were shown to the
    /// session: a read of that version, when the file has not changed since (else nothing is
    /// recorded). Returns whether it was recorded.
    pub(super) fn record_search(
        &self,
        files: &SearchFiles,
        file: &SearchFile,
        seen: &SearchSeen,
        bytes: Vec<u8>,
    ) -> bool {
        let rel = &files.listed[file.index].rel;
        if !self.provider.unchanged(&files.root, rel, &seen.fingerprint) {
            return false;
        }
        let path: PathBuf = files.root.path().join(rel);
        self.observed.record(Path::new(&path), seen.version, seen.links);
        self.provider.store().put(seen.version, bytes.into());
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
        let listings = crate::listing::Listings::for_provider(&provider);
        let observed = Observations::new(10);
        let ctx = FileContext::new(&provider, &listings, scope, &observed, false);

        let FilesListed::Files(files) = ctx.search_files(Some(".."), &|| false, None).unwrap() else {
            panic!()
        };
        let shown: Vec<_> = (0..files.len())
            .map(|i| (ctx.search_file(&files, i).unwrap().display, files.under(i).to_str().unwrap()))
            .collect();
        let b = root.join("b.txt").display().to_string();
        assert_eq!(shown, [(b, "b.txt"), ("a.rs".to_owned(), "src/a.rs")], "shown as read accepts them");
        assert!(matches!(ctx.search_files(None, &|| true, None), Ok(FilesListed::Stopped { .. })));

        let a = &ctx.search_file(&files, 1).unwrap();
        let Ok(SearchContents::Whole { bytes, seen }) = ctx.open_search_file(&files, a, true) else {
            panic!()
        };
        assert_eq!(seen.version, Version::of(b"needle\n"));
        assert!(ctx.record_search(&files, a, &seen, bytes.clone()));
        assert_eq!(observed.get(&root.join("src/a.rs")), Some(seen.version));

        // Changed after the search: nothing is recorded.
        let b_file = &ctx.search_file(&files, 0).unwrap();
        let Ok(SearchContents::Whole { bytes, seen }) = ctx.open_search_file(&files, b_file, true) else {
            panic!()
        };
        std::fs::write(root.join("b.txt"), "changed, longer\n").unwrap();
        assert!(!ctx.record_search(&files, b_file, &seen, bytes));
        assert_eq!(observed.get(&root.join("b.txt")), None);
    }
}
