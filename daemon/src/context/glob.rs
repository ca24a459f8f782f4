//! The file context's `glob`: the files of a folder the session may read whose path matches,
//! handed out newest first ([`crate::search::Times`]), each path built as it is reached.

use super::search::{FilesListed, SearchFile, SearchFiles};
use super::{ContextError, FileContext};
use crate::search::{Clock, PathMatch, Stopped, Times};

/// What listing a glob's files gave (a cancelled glob is an error: it answers nothing).
pub enum Globbed<'a, 'c> {
    /// Its hits, newest first.
    Hits(GlobHits<'a, 'c>),
    /// Its time ran out while it listed the files under `path` (as shown): nothing listed.
    ListingTimedOut {
        /// The folder being listed.
        path: String,
    },
}

/// The hits of a glob in the order it shows them, each built as it is reached: newest first,
/// files of the same time in the order of their shown paths.
pub struct GlobHits<'a, 'c> {
    ctx: &'a FileContext<'c>,
    files: SearchFiles,
    hits: Times,
    /// The rest of the current group of one time, in reverse order of their paths.
    tied: Vec<SearchFile>,
}

impl GlobHits<'_, '_> {
    /// How many hits are still to come.
    pub fn left(&self) -> usize {
        self.tied.len() + self.hits.left()
    }

    /// Whether `file` is still a regular file reached through no symlink (to list it).
    pub fn still_listed(&self, file: &SearchFile) -> bool {
        self.ctx.still_listed(&self.files, file)
    }

    /// Whether the folder had more files than a listing holds.
    pub fn truncated(&self) -> bool {
        self.files.truncated
    }

    /// Whether to go on showing hits: [`ContextError::Cancelled`] once `clock` says the glob's
    /// request was cancelled (its answer is then that error, nothing shown).
    pub fn go_on(&self, clock: &Clock<'_>) -> Result<(), ContextError> {
        if clock.cancelled() {
            return Err(ContextError::Cancelled { path: self.files.base.display().to_string() });
        }
        Ok(())
    }
}

impl Iterator for GlobHits<'_, '_> {
    type Item = SearchFile;

    fn next(&mut self) -> Option<SearchFile> {
        loop {
            if let Some(file) = self.tied.pop() {
                return Some(file);
            }
            let group = self.hits.next_group()?;
            self.tied = group.iter().filter_map(|&(_, i)| self.ctx.search_file(&self.files, i)).collect();
            self.tied.sort_by(|a, b| b.display.cmp(&a.display));
        }
    }
}

impl<'c> FileContext<'c> {
    /// `glob`: the files under `path` (default: the cwd) the session may read whose path
    /// relative to it `matcher` matches, newest first; `clock` is asked while they are listed.
    /// Only the first `sorted` hits are sorted up front, the rest when they are reached.
    pub fn glob<'a>(
        &'a self,
        matcher: &PathMatch,
        path: Option<&str>,
        clock: &Clock<'_>,
        sorted: usize,
    ) -> Result<Globbed<'a, 'c>, ContextError> {
        // Only the files that match are sorted by time: the walk dates those alone.
        let files = match self.search_files(path, &|| clock.stop(), Some(&|path| matcher.is_match(path)))? {
            FilesListed::Files(files) => files,
            FilesListed::Stopped { path } => {
                return match clock.stopped() {
                    Some(Stopped::TimedOut) => Ok(Globbed::ListingTimedOut { path }),
                    _ => Err(ContextError::Cancelled { path }),
                };
            }
        };
        let hits: Vec<(i64, usize)> = (0..files.len())
            .filter(|&i| matcher.is_match(files.under(i)) && !self.search_hidden(&files, i))
            .map(|i| (files.mtime_ns(i), i))
            .collect();
        let hits = Times::new(hits, sorted);
        Ok(Globbed::Hits(GlobHits { ctx: self, files, hits, tied: Vec::new() }))
    }
}
