//! Which files match: probed a batch at a time on up to two threads, each file read whole or
//! as a stream in pieces between which the search's clock is asked, binary files skipped.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use grep_regex::RegexMatcher;
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkMatch};

use super::bounds::{Clock, SEARCH_HEAP_BYTES};
use super::pieces::{PieceSize, Pieced, search_pieces};
use crate::provider::searched::{BINARY_BYTE, BINARY_PEEK, SearchContents, is_binary};

/// Files the first probe batch holds: enough to keep the threads busy, few enough that a
/// search with a `head_limit` stops soon after it is reached. Each next batch is twice as big,
/// up to [`PROBE_BATCH_MAX`]: a search of 100,000 files waits for its slower thread at the end
/// of a batch (and starts one anew) 18 times instead of 390.
const PROBE_BATCH: usize = 256;
/// Files the biggest probe batch holds.
const PROBE_BATCH_MAX: usize = 8192;

/// `candidates` in batches of [`PROBE_BATCH`] files, then each twice the last, up to
/// [`PROBE_BATCH_MAX`].
pub fn batches<T>(candidates: &[T]) -> impl Iterator<Item = &[T]> {
    let mut rest = candidates;
    let mut size = PROBE_BATCH;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let (batch, after) = rest.split_at(size.min(rest.len()));
        rest = after;
        size = (size * 2).min(PROBE_BATCH_MAX);
        Some(batch)
    })
}

/// A file opened for a probe, or why it could not be.
pub enum Searchable {
    /// What to search.
    Contents(SearchContents),
    /// Not a file to search any more (gone, no regular file now, refused): skipped uncounted.
    Gone,
    /// It could not be opened or read.
    Unreadable,
}

/// Whether one file matches (and how many lines, when counting).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// Not searched to its end: the search stopped first.
    Unsearched,
    /// It could not be opened or read.
    Unreadable,
    /// Too big for a multiline search, which reads each file whole.
    TooBig,
    /// No match, or a binary file.
    Skip,
    /// It matches: lines counted when asked, else 1.
    Matched(u64),
}

/// The searcher every grep uses to find matches (no context: a probe shows nothing); without
/// `binary` detection for bytes already looked through for a NUL.
fn probe_searcher(multiline: bool, binary: bool) -> Searcher {
    let binary = if binary { BinaryDetection::quit(BINARY_BYTE) } else { BinaryDetection::none() };
    SearcherBuilder::new()
        .binary_detection(binary)
        .line_number(false)
        .multi_line(multiline)
        .heap_limit(Some(SEARCH_HEAP_BYTES))
        .build()
}

/// Probes `batch`, each file opened by `open`, on up to two threads, in order, until `clock`
/// says stop; `count`: count matching lines rather than stop at the first.
pub fn probe_all<T: Sync>(
    batch: &[T],
    open: &(dyn Fn(&T) -> Searchable + Sync),
    matcher: &RegexMatcher,
    count: bool,
    clock: &Clock<'_>,
) -> Vec<Probe> {
    let multiline = grep_matcher::Matcher::line_terminator(matcher).is_none();
    let next = AtomicUsize::new(0);
    let results: Vec<Mutex<Probe>> = batch.iter().map(|_| Mutex::new(Probe::Unsearched)).collect();
    let work = || {
        let mut searchers = (probe_searcher(multiline, true), probe_searcher(multiline, false));
        let mut pace = PieceSize::default();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(file) = batch.get(i) else { break };
            // Tests slow a search down here to cancel it midway.
            #[cfg(feature = "failpoints")]
            fail::fail_point!("search::file");
            if clock.stop() {
                break;
            }
            let probe = probe(open(file), matcher, &mut searchers, &mut pace, count, clock);
            *results[i].lock().unwrap_or_else(PoisonError::into_inner) = probe;
        }
    };
    if batch.len() < 8 || probe_threads() < 2 {
        work();
    } else {
        std::thread::scope(|scope| {
            scope.spawn(work);
            work();
        });
    }
    results.into_iter().map(|r| r.into_inner().unwrap_or_else(PoisonError::into_inner)).collect()
}

fn probe_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Whether an `opened` file matches: read whole or, when big, as a stream, in pieces between
/// which `clock` is asked; a file with a NUL byte is binary and skipped. A multiline search
/// runs over the whole file at once (a match may span any lines), so it stops only between
/// files, and skips files too big to read whole. `searchers`: one that detects binary data
/// (for streams), one that does not (for bytes looked through for a NUL already).
fn probe(
    opened: Searchable,
    matcher: &RegexMatcher,
    (searcher, bytes_searcher): &mut (Searcher, Searcher),
    pace: &mut PieceSize,
    count: bool,
    clock: &Clock<'_>,
) -> Probe {
    let mut sink = ProbeSink { count, matched: 0, binary: false };
    let stop = || clock.stop();
    let multiline = searcher.multi_line_with_matcher(matcher);
    // Bytes read unhashed were looked through for a NUL as far as their start already.
    let (bytes, checked) = match opened {
        Searchable::Gone => return Probe::Skip,
        Searchable::Unreadable => return Probe::Unreadable,
        Searchable::Contents(SearchContents::Binary) => return Probe::Skip,
        Searchable::Contents(SearchContents::Bytes(bytes)) => {
            let checked = usize::try_from(BINARY_PEEK).unwrap_or(usize::MAX).min(bytes.len());
            (bytes, checked)
        }
        Searchable::Contents(SearchContents::Whole { bytes, .. }) => (bytes, 0),
        Searchable::Contents(SearchContents::Stream(_)) if multiline => return Probe::TooBig,
        Searchable::Contents(SearchContents::Stream(handle)) => {
            let mut paced = Pieced::new(&handle, pace, &stop);
            let searched = searcher.search_reader(matcher, &mut paced, &mut sink);
            if paced.stopped() {
                return Probe::Unsearched;
            }
            return probed(searched.map(|()| true), &sink);
        }
    };
    if is_binary(&bytes[checked..]) {
        return Probe::Skip;
    }
    let searched = if multiline {
        bytes_searcher.search_slice(matcher, &bytes, &mut sink).map(|()| true)
    } else {
        search_pieces(bytes_searcher, matcher, &bytes, &mut sink, pace, &stop, |sink| {
            !sink.count && sink.matched > 0
        })
    };
    probed(searched, &sink)
}

/// What a probe's search (`Ok(false)`: stopped before the end) into `sink` found.
fn probed(searched: io::Result<bool>, sink: &ProbeSink) -> Probe {
    match searched {
        Err(_) => Probe::Unreadable,
        Ok(false) => Probe::Unsearched,
        Ok(true) if sink.binary || sink.matched == 0 => Probe::Skip,
        Ok(true) => Probe::Matched(sink.matched),
    }
}

/// Counts matching lines (or stops at the first, when not counting).
struct ProbeSink {
    count: bool,
    matched: u64,
    binary: bool,
}

impl Sink for ProbeSink {
    type Error = io::Error;

    fn matched(&mut self, _: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, io::Error> {
        self.matched += mat.lines().count().max(1) as u64;
        Ok(self.count)
    }

    fn binary_data(&mut self, _: &Searcher, _: u64) -> Result<bool, io::Error> {
        self.binary = true;
        Ok(false)
    }
}
