//! The lines a `content` grep shows: a matching file searched again with line numbers and
//! context, in pieces between which the search's clock is asked, each line handed to the
//! answer being built ([`GrepOut`]).

use std::io;

use grep_regex::RegexMatcher;
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};

use super::bounds::{Clock, SEARCH_HEAP_BYTES};
use super::pieces::{PieceSize, Pieced};
use super::query::{GrepMode, GrepQuery};
use crate::provider::searched::{BINARY_BYTE, SearchContents};

/// What a grep's finds are shown in (the tool's answer), fed in the order it shows them; a
/// `false` from [`file`](Self::file) or [`line`](Self::line) stops the search: its answer is
/// full.
pub trait GrepOut {
    /// A matching file (`files_with_matches` and `count` modes), with `count` its matching
    /// lines when counting.
    fn file(&mut self, display: &str, count: u64) -> bool;
    /// The lines of a matching file follow (`content` mode).
    fn start_lines(&mut self);
    /// One line of the file `display`, numbered from 1: a match, or context around one.
    fn line(&mut self, display: &str, number: u64, bytes: &[u8]) -> bool;
    /// A gap between two groups of lines of one file.
    fn gap(&mut self);
    /// The file's lines end; with `keep` false (binary after all, or unreadable midway) what
    /// they added goes. Whether a line of the file is shown (it then counts as read).
    fn end_lines(&mut self, keep: bool) -> bool;
}

/// How showing one file's lines went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinesShown {
    /// Its search failed (not for being stopped): it could not be read.
    pub failed: bool,
    /// It was stopped midway (cancelled, or out of time): what was shown stays.
    pub interrupted: bool,
    /// It holds binary data: skipped whole.
    pub binary: bool,
    /// The answer said stop (it is full).
    pub full: bool,
}

/// The searcher that shows lines (with context), for `content` greps; one per search.
pub struct LineSearcher {
    searcher: Searcher,
    pace: PieceSize,
}

impl LineSearcher {
    /// The searcher of `query`'s lines.
    pub fn new(query: &GrepQuery) -> Self {
        let context = if query.mode == GrepMode::Content { query.context } else { 0 };
        let searcher = SearcherBuilder::new()
            .binary_detection(BinaryDetection::quit(BINARY_BYTE))
            .line_number(true)
            .multi_line(query.multiline)
            .before_context(context)
            .after_context(context)
            .heap_limit(Some(SEARCH_HEAP_BYTES))
            .build();
        Self { searcher, pace: PieceSize::default() }
    }

    /// Feeds the matching lines of `contents` (the file `display`) into `out`, read in pieces
    /// between which `clock` is asked (a multiline search of bytes in memory runs over them
    /// at once).
    pub fn show(
        &mut self,
        matcher: &RegexMatcher,
        contents: &SearchContents,
        display: &str,
        out: &mut dyn GrepOut,
        clock: &Clock<'_>,
    ) -> LinesShown {
        let mut sink = LineSink { out, display, binary: false, full: false };
        let multiline = self.searcher.multi_line_with_matcher(matcher);
        let (searched, interrupted) = match contents {
            // A multiline search runs over the whole file at once: nothing to interrupt.
            SearchContents::Whole { bytes, .. } if multiline => {
                (self.searcher.search_slice(matcher, bytes, &mut sink), false)
            }
            SearchContents::Whole { bytes, .. } | SearchContents::Bytes(bytes) => {
                self.search(matcher, &bytes[..], &mut sink, clock)
            }
            SearchContents::Stream(handle) => self.search(matcher, handle, &mut sink, clock),
            SearchContents::Binary => (Ok(()), false),
        };
        let binary = sink.binary || matches!(contents, SearchContents::Binary);
        LinesShown { failed: searched.is_err(), interrupted, binary, full: sink.full }
    }

    /// Searches `source` into `sink` in pieces; whether it was stopped.
    fn search<R: io::Read>(
        &mut self,
        matcher: &RegexMatcher,
        source: R,
        sink: &mut LineSink<'_, '_>,
        clock: &Clock<'_>,
    ) -> (Result<(), io::Error>, bool) {
        let stop = || clock.stop_showing();
        let mut paced = Pieced::new(source, &mut self.pace, &stop);
        let searched = self.searcher.search_reader(matcher, &mut paced, sink);
        (searched, paced.stopped())
    }
}

/// Feeds one file's lines into a [`GrepOut`].
struct LineSink<'o, 'd> {
    out: &'o mut dyn GrepOut,
    display: &'d str,
    binary: bool,
    full: bool,
}

impl LineSink<'_, '_> {
    fn line(&mut self, number: u64, bytes: &[u8]) -> bool {
        let go_on = self.out.line(self.display, number, bytes);
        self.full |= !go_on;
        go_on
    }
}

impl Sink for LineSink<'_, '_> {
    type Error = io::Error;

    fn matched(&mut self, _: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, io::Error> {
        let first = mat.line_number().unwrap_or(1);
        for (i, line) in mat.lines().enumerate() {
            if !self.line(first + i as u64, line) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn context(&mut self, _: &Searcher, ctx: &SinkContext<'_>) -> Result<bool, io::Error> {
        Ok(self.line(ctx.line_number().unwrap_or(0), ctx.bytes()))
    }

    fn context_break(&mut self, _: &Searcher) -> Result<bool, io::Error> {
        self.out.gap();
        Ok(true)
    }

    fn binary_data(&mut self, _: &Searcher, _: u64) -> Result<bool, io::Error> {
        self.binary = true;
        Ok(false)
    }
}
