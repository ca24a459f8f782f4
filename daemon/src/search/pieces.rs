//! Searching a file in pieces, so that a search sees its stop within a file too: the regex runs
//! on one bounded piece at a time, and before each piece the search asks whether it must stop
//! (its request was cancelled, its client went away, its time is up). A regex engine cannot be
//! interrupted inside one call, and a pattern that is expensive on its input (the issue's
//! `[a-m][a-z]{24}[\x{100}-\x{10FFFF}]` over random letters: about a microsecond per byte in a
//! release build, ten times that in a debug one) made one call over a whole file last tens of
//! seconds.
//!
//! Pieces end at line ends, so a line-oriented search finds in them exactly what it finds in
//! the whole file (a match never spans a line end; ripgrep's own reader-based search works on
//! such buffers too). Their size adapts to how long the last one took ([`PieceSize`]): about
//! [`PIECE_TIME`] each, whatever the pattern costs, from [`PIECE_MIN`] to [`PIECE_MAX`] bytes,
//! never less than one line. A file held in memory is cut into slices ([`search_pieces`], no
//! copy); a stream, or a search that must number lines and show context across pieces, reads
//! through [`Pieced`], which hands the searcher at most a piece per read.

use std::io;
use std::time::{Duration, Instant};

use grep_regex::RegexMatcher;
use grep_searcher::{Searcher, Sink};

/// About how long the regex runs between two looks at the stop.
pub(super) const PIECE_TIME: Duration = Duration::from_millis(10);
/// The smallest piece (a piece still holds at least one whole line).
pub(super) const PIECE_MIN: usize = 1024;
/// The largest piece: big enough that a cheap pattern pays nothing for the looks.
pub(super) const PIECE_MAX: usize = 256 * 1024;
/// The first piece of a search, before anything was timed.
const PIECE_FIRST: usize = 4 * 1024;

/// The size of the next piece, from how long the last ones took; one per searching thread,
/// kept from file to file.
#[derive(Debug, Clone)]
pub(super) struct PieceSize {
    piece: usize,
}

impl Default for PieceSize {
    fn default() -> Self {
        Self { piece: PIECE_FIRST }
    }
}

impl PieceSize {
    /// The size of the next piece.
    pub(super) fn piece(&self) -> usize {
        self.piece
    }

    /// A piece of `bytes` took `took`: the next one is sized to take about [`PIECE_TIME`].
    pub(super) fn took(&mut self, bytes: usize, took: Duration) {
        if took > PIECE_TIME {
            let scaled = bytes as u128 * PIECE_TIME.as_nanos() / took.as_nanos().max(1);
            self.piece = usize::try_from(scaled).unwrap_or(PIECE_MAX).clamp(PIECE_MIN, PIECE_MAX);
        } else if took < PIECE_TIME / 4 && bytes >= self.piece {
            self.piece = (self.piece * 2).min(PIECE_MAX);
        }
    }
}

/// Where the piece of `bytes` that starts at `start` ends: just past the first line end at or
/// after `start + piece` bytes (the end of `bytes` when there is none).
fn piece_end(bytes: &[u8], start: usize, piece: usize) -> usize {
    let last = start.saturating_add(piece.max(1)).min(bytes.len());
    if last >= bytes.len() {
        return bytes.len();
    }
    // The piece's last byte is at `last - 1`; it ends at the first line end from there.
    match memchr::memchr(b'\n', &bytes[last - 1..]) {
        Some(at) => last + at,
        None => bytes.len(),
    }
}

/// Searches `bytes` (a whole file, line-oriented) in pieces ending at line ends, asking `stop`
/// before each and sizing them by `pace`; `done` says when the sink needs no more (a first
/// match found). `Ok(false)`: stopped before the end.
pub(super) fn search_pieces<S: Sink>(
    searcher: &mut Searcher,
    matcher: &RegexMatcher,
    bytes: &[u8],
    sink: &mut S,
    pace: &mut PieceSize,
    stop: &dyn Fn() -> bool,
    done: impl Fn(&S) -> bool,
) -> Result<bool, S::Error> {
    let mut start = 0;
    while start < bytes.len() {
        if stop() {
            return Ok(false);
        }
        let end = piece_end(bytes, start, pace.piece());
        let began = Instant::now();
        searcher.search_slice(matcher, &bytes[start..end], &mut *sink)?;
        pace.took(end - start, began.elapsed());
        if done(sink) {
            return Ok(true);
        }
        start = end;
    }
    Ok(true)
}

/// What [`Pieced`] answers a read once the search must stop (the searcher passes it back).
const STOPPED: &str = "the search was stopped";

/// A reader that asks `stop` before each read and hands out at most a piece per read: a
/// searcher reading through it runs its regex on about one piece between two looks (the time
/// between two reads is what the searcher spent on the last one).
pub(super) struct Pieced<'p, R> {
    inner: R,
    pace: &'p mut PieceSize,
    stop: &'p dyn Fn() -> bool,
    /// When the last read returned, and how many bytes it gave.
    last: Option<(Instant, usize)>,
    /// Whether a read was refused because the search must stop.
    stopped: bool,
}

impl<'p, R: io::Read> Pieced<'p, R> {
    /// `inner`, read in pieces sized by `pace`, until `stop` says so.
    pub(super) fn new(inner: R, pace: &'p mut PieceSize, stop: &'p dyn Fn() -> bool) -> Self {
        Self { inner, pace, stop, last: None, stopped: false }
    }

    /// Whether the search stopped this reader (its error is then that, not a read error).
    pub(super) fn stopped(&self) -> bool {
        self.stopped
    }
}

impl<R: io::Read> io::Read for Pieced<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some((at, bytes)) = self.last.take() {
            self.pace.took(bytes, at.elapsed());
        }
        if (self.stop)() {
            self.stopped = true;
            return Err(io::Error::other(STOPPED));
        }
        let want = buf.len().min(self.pace.piece());
        let read = self.inner.read(&mut buf[..want])?;
        self.last = Some((Instant::now(), read));
        Ok(read)
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::io::Read as _;

    use grep_searcher::SearcherBuilder;
    use grep_searcher::sinks::UTF8;

    use super::*;

    fn lines(n: usize) -> String {
        (0..n).map(|i| format!("line {i} {}\n", if i % 7 == 0 { "needle" } else { "hay" })).collect()
    }

    #[test]
    fn pieces_end_at_line_ends() {
        let text = b"ab\ncd\nef";
        assert_eq!(piece_end(text, 0, 1), 3);
        assert_eq!(piece_end(text, 0, 3), 3, "a piece whose last byte is a line end ends there");
        assert_eq!(piece_end(text, 0, 4), 6);
        assert_eq!(piece_end(text, 3, 4), 8, "no line end left: the rest");
        assert_eq!(piece_end(text, 6, 100), 8);
    }

    #[test]
    fn a_search_in_pieces_finds_what_the_whole_file_holds() {
        let text = lines(5000);
        let matcher = grep_regex::RegexMatcherBuilder::new()
            .line_terminator(Some(b'\n'))
            .build(r"^line \d+ needle$")
            .unwrap();
        let mut whole = Vec::new();
        SearcherBuilder::new()
            .build()
            .search_slice(
                &matcher,
                text.as_bytes(),
                UTF8(|_, line| {
                    whole.push(line.to_owned());
                    Ok(true)
                }),
            )
            .unwrap();
        for piece in [1, 10, 100, 4096] {
            let mut pace = PieceSize { piece };
            let mut found = Vec::new();
            let mut sink = UTF8(|_, line: &str| {
                found.push(line.to_owned());
                Ok(true)
            });
            let mut searcher = SearcherBuilder::new().build();
            let ended = search_pieces(
                &mut searcher,
                &matcher,
                text.as_bytes(),
                &mut sink,
                &mut pace,
                &|| false,
                |_| false,
            )
            .unwrap();
            assert!(ended);
            assert_eq!(found, whole, "pieces of {piece}");
        }
        assert_eq!(whole.len(), 715);
    }

    #[test]
    fn a_search_in_pieces_stops_between_pieces() {
        let text = lines(5000);
        let matcher = grep_regex::RegexMatcher::new("needle").unwrap();
        let looks = Cell::new(0);
        let stop = || {
            looks.set(looks.get() + 1);
            looks.get() > 3
        };
        let mut pace = PieceSize { piece: 1000 };
        let mut found = 0;
        let mut sink = UTF8(|_, _: &str| {
            found += 1;
            Ok(true)
        });
        let ended = search_pieces(
            &mut SearcherBuilder::new().build(),
            &matcher,
            text.as_bytes(),
            &mut sink,
            &mut pace,
            &stop,
            |_| false,
        )
        .unwrap();
        assert!(!ended);
        assert!(found > 0 && found < 715, "{found}");
    }

    #[test]
    fn the_pace_follows_what_pieces_cost() {
        assert_eq!(PieceSize::default().piece(), PIECE_FIRST);
        let mut pace = PieceSize { piece: 64 * 1024 };
        // An expensive pattern: 64 KiB took 160 ms, so the next piece is what takes 10 ms.
        pace.took(64 * 1024, PIECE_TIME * 16);
        assert_eq!(pace.piece(), 4 * 1024);
        pace.took(pace.piece(), PIECE_TIME * 1000);
        assert_eq!(pace.piece(), PIECE_MIN);
        // A cheap one: pieces double up to the largest.
        for _ in 0..20 {
            pace.took(pace.piece(), Duration::from_micros(10));
        }
        assert_eq!(pace.piece(), PIECE_MAX);
        // A short read (the end of a file) says nothing about the pace.
        pace.took(10, Duration::ZERO);
        assert_eq!(pace.piece(), PIECE_MAX);
    }

    #[test]
    fn a_paced_reader_hands_out_pieces_until_stopped() {
        let text = vec![b'x'; 100_000];
        let mut pace = PieceSize { piece: 4096 };
        let reads = Cell::new(0);
        let stop = || reads.get() >= 3;
        let mut paced = Pieced::new(&text[..], &mut pace, &stop);
        let mut buf = vec![0; 65536];
        for _ in 0..3 {
            let got = paced.read(&mut buf).unwrap();
            assert!(got <= 16384, "at most a piece, doubling while reads are cheap: {got}");
            reads.set(reads.get() + 1);
        }
        let err = paced.read(&mut buf).unwrap_err();
        assert!(paced.stopped(), "{err}");
    }
}
