//! The file context's `grep`: the files of a folder the session may read, probed by the search
//! engine ([`crate::search`]) a batch at a time, opened beneath their root; the finds handed to
//! the answer being built in the order it shows them, and the files whose lines it shows
//! recorded as read at the version searched.

use super::search::{FilesListed, SearchFile, SearchFiles};
use super::{ContextError, FileContext, ProviderError};
use crate::provider::searched::{SearchContents, is_binary};
use crate::search::{
    Clock, GrepMode, GrepOut, GrepQuery, LineSearcher, Probe, Searchable, Stopped, batches, probe_all,
};

/// How a grep ended (a cancelled one is an error: it answers nothing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grepped {
    /// It searched, within its bounds.
    Searched(GrepEnd),
    /// Its time ran out while it listed the files under `path` (as shown): nothing searched.
    ListingTimedOut {
        /// The folder being listed.
        path: String,
    },
}

/// What a grep that searched tells beside its finds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GrepEnd {
    /// Files that could not be read.
    pub unreadable: u64,
    /// Files too big for a multiline search, which reads each file whole.
    pub too_big: u64,
    /// When its time ran out: how many of how many files it searched.
    pub timed_out: Option<(usize, usize)>,
    /// Whether the folder had more files than a listing holds.
    pub truncated: bool,
}

/// How showing the lines of one matching file went.
enum Shown {
    /// Shown (or counted past the answer's budget).
    Done,
    /// It could not be read.
    Unreadable,
    /// The answer is full: stop.
    Full,
    /// The search had to stop while showing it (cancelled, or out of time): what was shown
    /// stays.
    Stopped,
}

impl FileContext<'_> {
    /// `grep`: `query` over the files under `path` (default: the cwd) the session may read,
    /// within `clock`, its finds fed to `out` in path order (`files_with_matches`: newest
    /// first). A file whose lines `out` shows counts as read at the version searched.
    pub fn grep(
        &self,
        query: &GrepQuery,
        path: Option<&str>,
        clock: &Clock<'_>,
        out: &mut dyn GrepOut,
    ) -> Result<Grepped, ContextError> {
        let files = match self.search_files(path, &|| clock.stop(), None)? {
            FilesListed::Files(files) => files,
            FilesListed::Stopped { path } => {
                return match clock.stopped() {
                    Some(Stopped::TimedOut) => Ok(Grepped::ListingTimedOut { path }),
                    _ => Err(ContextError::Cancelled { path }),
                };
            }
        };
        let cancelled = || ContextError::Cancelled { path: files.base.display().to_string() };
        let wanted = |index: usize| files.single || query.wants(files.under(index));
        let must_read = files.must_read(&query.needles);
        let candidates: Vec<SearchFile> = (0..files.len())
            .filter(|&i| must_read.as_ref().is_none_or(|m| m.get(i).copied().unwrap_or(true)))
            .filter(|&i| wanted(i))
            .filter_map(|i| self.search_file(&files, i))
            .collect();
        let open = |file: &SearchFile| match self.open_search_bytes(&files, file) {
            Ok(contents) => Searchable::Contents(contents),
            Err(e) if gone(&e) => Searchable::Gone,
            Err(_) => Searchable::Unreadable,
        };
        let mut end = GrepEnd { truncated: files.truncated, ..GrepEnd::default() };
        // Candidates searched to their end (a file whose lines were being shown when time ran
        // out does not count), and whether the answer said it is full.
        let (mut searched, mut full) = (0usize, false);
        // files_with_matches: every matching file first, then listed newest first.
        let mut matching: Vec<SearchFile> = Vec::new();
        let mut lines = LineSearcher::new(query);
        // Which files match is found on a few threads, a batch at a time; what they show is then
        // added in path order, so the answer is the same as one thread's.
        'batches: for batch in batches(&candidates) {
            if clock.stop() {
                break;
            }
            let probes = probe_all(batch, &open, &query.matcher, query.mode == GrepMode::Count, clock);
            if clock.cancelled() {
                return Err(cancelled());
            }
            for (file, probe) in batch.iter().zip(probes) {
                match probe {
                    Probe::Unsearched => continue,
                    Probe::Unreadable => end.unreadable += 1,
                    Probe::TooBig => end.too_big += 1,
                    Probe::Skip => {}
                    Probe::Matched(count) => match query.mode {
                        GrepMode::FilesWithMatches => matching.push(file.clone()),
                        GrepMode::Count => full = !out.file(&file.display, count),
                        GrepMode::Content => {
                            match self.show_lines(&files, file, query, &mut lines, out, clock) {
                                Shown::Unreadable => end.unreadable += 1,
                                Shown::Done => {}
                                Shown::Full => {
                                    searched += 1;
                                    full = true;
                                    break 'batches;
                                }
                                Shown::Stopped => break 'batches,
                            }
                        }
                    },
                }
                searched += 1;
                if full {
                    break 'batches;
                }
            }
        }
        if clock.cancelled() {
            return Err(cancelled());
        }
        files.fill_filters();
        if query.mode == GrepMode::FilesWithMatches {
            // Each time looked up once (a file the walk left undated is dated here).
            let mut matching: Vec<(i64, SearchFile)> =
                matching.into_iter().map(|file| (files.mtime_of(&file), file)).collect();
            matching.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.display.cmp(&b.1.display)));
            for (_, file) in matching {
                if !out.file(&file.display, 1) {
                    full = true;
                    break;
                }
            }
        }
        // Why it stopped before every candidate was searched, if it did; out of time, it says
        // how much was searched.
        let stopped = match (searched < candidates.len(), full) {
            (false, _) => None,
            (true, true) => Some(Stopped::Bounded),
            (true, false) => clock.stopped(),
        };
        if stopped == Some(Stopped::TimedOut) {
            // Every file the search would look at (the filters' skips count as searched).
            let total =
                (0..files.len()).filter(|&i| wanted(i) && self.search_file(&files, i).is_some()).count();
            let unsearched = candidates.len() - searched;
            end.timed_out = Some((total.saturating_sub(unsearched), total));
        }
        Ok(Grepped::Searched(end))
    }

    /// Feeds the lines of matching `file` to `out`; when lines were shown, the file counts as
    /// read at the version searched (also when the search stopped while showing it: the lines
    /// shown are of that version).
    fn show_lines(
        &self,
        files: &SearchFiles,
        file: &SearchFile,
        query: &GrepQuery,
        lines: &mut LineSearcher,
        out: &mut dyn GrepOut,
        clock: &Clock<'_>,
    ) -> Shown {
        // Read whole and hashed, to record what it showed as read.
        let contents = match self.open_search_file(files, file, true) {
            Ok(contents) => contents,
            Err(e) if gone(&e) => return Shown::Done,
            Err(_) => return Shown::Unreadable,
        };
        match &contents {
            SearchContents::Binary => return Shown::Done,
            SearchContents::Whole { bytes, .. } if is_binary(bytes) => return Shown::Done,
            _ => {}
        }
        out.start_lines();
        let shown = lines.show(&query.matcher, &contents, &file.display, out, clock);
        if (shown.failed && !shown.interrupted) || shown.binary {
            // What this file added goes: a binary file is skipped whole.
            out.end_lines(false);
            return if shown.binary { Shown::Done } else { Shown::Unreadable };
        }
        if out.end_lines(true)
            && let SearchContents::Whole { bytes, seen } = contents
        {
            self.record_search(files, file, &seen, bytes);
        }
        if shown.interrupted {
            Shown::Stopped
        } else if shown.full {
            Shown::Full
        } else {
            Shown::Done
        }
    }
}

/// Whether a listed file that failed to open is simply not one to search any more, rather than
/// one that could not be read: gone, no regular file now, a name that now leads through a link
/// (to outside, maybe: nothing there is counted), or one of the daemon's own files.
fn gone(err: &ContextError) -> bool {
    matches!(
        err,
        ContextError::File(
            ProviderError::NotFound { .. }
                | ProviderError::NotRegularFile { .. }
                | ProviderError::IsDirectory { .. }
                | ProviderError::Busy { .. }
                | ProviderError::Private { .. }
        )
    )
}
