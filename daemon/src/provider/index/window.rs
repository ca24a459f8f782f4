//! Cutting a window of lines out of any byte source (a buffer, a mapping, positional reads of
//! a file) at the cost of the window, not the file, using the line index to find its start.

use std::borrow::Cow;

use super::buf::LineBuf;
use super::lines::{LineEnds, LineIndex, NotText, prefix_bytes};

/// Where window bytes come from: a buffer in memory, a mapping, or positional reads.
pub trait ByteSource {
    /// Up to `max` bytes at `offset` (more or fewer is fine; empty means end of file).
    fn chunk_at(&self, offset: u64, max: usize) -> std::io::Result<Cow<'_, [u8]>>;
}

impl ByteSource for [u8] {
    fn chunk_at(&self, offset: u64, _max: usize) -> std::io::Result<Cow<'_, [u8]>> {
        let start = usize::try_from(offset).unwrap_or(usize::MAX).min(self.len());
        Ok(Cow::Borrowed(&self[start..]))
    }
}

impl ByteSource for std::fs::File {
    fn chunk_at(&self, offset: u64, max: usize) -> std::io::Result<Cow<'_, [u8]>> {
        use std::os::unix::fs::FileExt;
        let mut buf = vec![0u8; max.min(256 * 1024)];
        let n = loop {
            match self.read_at(&mut buf, offset) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        };
        buf.truncate(n);
        Ok(Cow::Owned(buf))
    }
}

/// What a window asks for: which lines, whether long lines are cut, and how many bytes it may
/// hold. Lines come back whole unless `max_line_chars` says otherwise; the byte budget is what
/// bounds a window of whole lines (see [`window`]).
#[derive(Debug, Clone, Copy)]
pub struct WindowRequest {
    /// 1-based number of the first line.
    pub offset: u64,
    /// Most lines.
    pub limit: u64,
    /// Lines longer than this many characters are cut to it, and only a prefix of them is read
    /// (a huge line is never loaded whole just to be cut); `None`: lines are returned whole.
    pub max_line_chars: Option<u32>,
    /// Most bytes the window may hold: its lines' UTF-8 bytes plus what `overhead` adds for
    /// each. The window stops before a line that would pass it.
    pub max_bytes: u64,
    /// Bytes the caller will add around line `n` (`cut`: whether the line was cut), counted
    /// against `max_bytes` (a projection's numbering and marks).
    pub overhead: fn(n: u64, cut: bool) -> u64,
    /// What `overhead` adds up to over the whole lines `first..=last` (none cut), said at once
    /// when the caller can: a window whose line ends the index keeps then checks its budget
    /// once for a run of lines instead of once per line. `None`: line by line.
    pub overhead_of_lines: Option<fn(first: u64, last: u64) -> u64>,
    /// When the first line alone passes `max_bytes`: cut it to fit (`true`), or return no
    /// lines and say so in [`Window::oversized`] (`false`).
    pub fit_first: bool,
}

impl WindowRequest {
    /// Lines `offset..offset + limit`, whole, at most `max_bytes` of them.
    pub fn whole(offset: u64, limit: u64, max_bytes: u64) -> Self {
        Self {
            offset,
            limit,
            max_line_chars: None,
            max_bytes,
            overhead: |_, _| 0,
            overhead_of_lines: Some(|_, _| 0),
            fit_first: false,
        }
    }

    /// The same request with lines over `chars` characters cut (`None`: whole lines).
    pub fn cut_at(self, chars: Option<u32>) -> Self {
        Self { max_line_chars: chars, ..self }
    }
}

/// A first line too long for its window's byte budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Oversized {
    /// Its 1-based number.
    pub line: u64,
    /// Its length in bytes (without its line terminator).
    pub bytes: u64,
}

/// Lines of the chunk at hand taken in place, not copied yet: file bytes `from..to` belong at
/// `at` in the text.
#[derive(Clone, Copy)]
pub(super) struct Run {
    from: u64,
    to: u64,
    at: usize,
    /// Bytes at the start of the run before its first line (the run starts at its chunk's start,
    /// so that the chunk's own buffer can become the text without a copy; they are blanked).
    skip: usize,
}

/// A window's lines while they are cut. A line found whole in the chunk at hand is only
/// recorded (a [`Run`] of the chunk's bytes, copied once when the chunk is left, or taken as
/// the text itself when the chunk is an owned read buffer and the run starts the window);
/// a line read across chunks is copied in. The text is checked as UTF-8 once, when the window
/// is complete (one pass instead of one call per line; lines are split at `\n`, which never
/// falls inside a character, and every other byte the text holds is part of a line of the
/// file, so the whole is valid exactly when the file's lines are).
pub(super) struct RawLines {
    text: Vec<u8>,
    bounds: Vec<(usize, usize)>,
    line_bytes: usize,
    run: Option<Run>,
}

impl RawLines {
    /// Adds a line whose bytes are `len` bytes at `pos` in the chunk at hand, which starts at
    /// `start` (`owned`: a buffer read for this window).
    fn push_in_chunk(&mut self, start: u64, owned: bool, pos: u64, len: usize) {
        if self.run.is_none() {
            self.run = Some(self.planned_run(start, owned, pos));
        }
        let Some(run) = self.run.as_mut() else { return };
        let start = run.at + usize::try_from(pos - run.from).unwrap_or(usize::MAX);
        self.bounds.push((start, start + len));
        run.to = pos + len as u64;
        self.line_bytes += len;
    }

    /// The open run, or the one a line at `pos` in the chunk at hand (which starts at `start`;
    /// `owned`: a buffer read for this window) would open.
    fn planned_run(&self, start: u64, owned: bool, pos: u64) -> Run {
        if let Some(run) = self.run {
            return run;
        }
        if self.bounds.is_empty() && self.text.is_empty() && owned {
            Run { from: start, to: pos, at: 0, skip: usize::try_from(pos - start).unwrap_or(usize::MAX) }
        } else {
            Run { from: pos, to: pos, at: self.text.len(), skip: 0 }
        }
    }

    /// Adds a line read across chunks (its bytes copied).
    fn push_copied<S: ByteSource + ?Sized>(&mut self, cursor: &Cursor<'_, S>, line: &[u8]) {
        self.flush(cursor);
        let start = self.text.len();
        self.text.extend_from_slice(line);
        self.bounds.push((start, self.text.len()));
        self.line_bytes += line.len();
    }

    /// Copies the open run out of the chunk `cursor` holds (before the cursor moves on).
    fn flush<S: ByteSource + ?Sized>(&mut self, cursor: &Cursor<'_, S>) {
        let Some(run) = self.run.take() else { return };
        let from = usize::try_from(run.from - cursor.chunk_start).unwrap_or(usize::MAX);
        let to = usize::try_from(run.to - cursor.chunk_start).unwrap_or(usize::MAX);
        let bytes = cursor.chunk.get(from..to).unwrap_or_default();
        self.text.resize(run.at + run.skip, b' ');
        self.text.extend_from_slice(bytes.get(run.skip..).unwrap_or_default());
    }

    fn is_empty(&self) -> bool {
        self.bounds.is_empty()
    }

    /// The lines, checked as UTF-8; the chunk's own buffer becomes the text when it can.
    fn finish<S: ByteSource + ?Sized>(
        mut self,
        cursor: &mut Cursor<'_, S>,
    ) -> Result<LineBuf, std::str::Utf8Error> {
        match self.run {
            Some(run) if run.at == 0 && run.from == cursor.chunk_start && cursor.owned() => {
                let mut text = std::mem::take(&mut cursor.chunk).into_owned();
                text.truncate(usize::try_from(run.to - run.from).unwrap_or(usize::MAX));
                let skip = run.skip.min(text.len());
                text[..skip].fill(b' ');
                self.text = text;
            }
            _ => self.flush(cursor),
        }
        let text = String::from_utf8(self.text).map_err(|e| e.utf8_error())?;
        Ok(LineBuf { text, bounds: self.bounds, line_bytes: self.line_bytes })
    }
}

/// A window of decoded lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    /// 1-based number of the first line.
    pub start_line: u64,
    /// The lines, without terminators and `\r`; whole unless the request cut them.
    pub lines: LineBuf,
    /// 1-based numbers of the lines that were cut (at the character cap, or to fit).
    pub truncated: Vec<u64>,
    /// Lines in the whole file.
    pub total_lines: u64,
    /// Whether the window stopped before its last asked line (and before the end of the file)
    /// because the next line would have passed the byte budget.
    pub capped: bool,
    /// Set, with no lines, when the first line alone passes the byte budget and the request
    /// did not ask to cut it to fit.
    pub oversized: Option<Oversized>,
}

/// Decodes one line's leading bytes: drop a trailing `\r` (unless the line goes on past
/// `bytes`: `cut_by_read`), cut at `max_chars` characters. Says whether the line was cut.
pub(super) fn decode_line(
    bytes: &[u8],
    cut_by_read: bool,
    max_chars: Option<u32>,
) -> Result<(&str, bool), NotText> {
    let mut bytes = bytes;
    if !cut_by_read && bytes.last() == Some(&b'\r') {
        bytes = &bytes[..bytes.len() - 1];
    }
    // A prefix may end inside a character: keep only complete ones.
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) if cut_by_read && e.error_len().is_none() => {
            std::str::from_utf8(&bytes[..e.valid_up_to()]).map_err(|_| NotText::InvalidUtf8(0))?
        }
        Err(e) => return Err(NotText::InvalidUtf8(e.valid_up_to() as u64)),
    };
    let Some(max) = max_chars else {
        return Ok((text, cut_by_read));
    };
    // No more bytes than the cap means no more characters than the cap: skip counting.
    if text.len() <= max as usize {
        return Ok((text, cut_by_read));
    }
    match text.char_indices().nth(max as usize) {
        Some((at, _)) => Ok((&text[..at], true)),
        None => Ok((text, cut_by_read)),
    }
}

/// `text` cut to at most `bytes` bytes, at a character boundary.
pub(super) fn cut_to_bytes(text: &str, bytes: u64) -> &str {
    let mut at = usize::try_from(bytes).unwrap_or(usize::MAX).min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    &text[..at]
}

/// The position of the first `\n` in `bytes`: the first 64 bytes (the usual line is shorter)
/// eight at a time inline, then `memchr`, whose set-up costs more than a short line.
#[inline]
pub(super) fn newline(bytes: &[u8]) -> Option<usize> {
    let mut at = 0;
    for chunk in bytes.chunks_exact(8).take(8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let found = newline_bits(u64::from_le_bytes(word));
        if found != 0 {
            return Some(at + (found.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    memchr::memchr(b'\n', &bytes[at..]).map(|i| at + i)
}

/// How many bytes to ask a source for at once.
pub(super) const READ_AHEAD: usize = 256 * 1024;

pub(super) fn eof() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the file is shorter than its index")
}

/// Reads forward through a source, keeping one chunk so that consecutive lines come from one
/// read (a mapping or a buffer is one chunk; a file is read 256 KiB at a time).
pub(super) struct Cursor<'a, S: ByteSource + ?Sized> {
    source: &'a S,
    chunk: Cow<'a, [u8]>,
    chunk_start: u64,
    /// How much to ask for next: first what the window probably spans (a 50-line window is a
    /// few KiB), doubling up to [`READ_AHEAD`] as a window turns out to be longer.
    next: usize,
}

impl<'a, S: ByteSource + ?Sized> Cursor<'a, S> {
    fn new(source: &'a S, first: usize) -> Self {
        Self { source, chunk: Cow::Borrowed(&[]), chunk_start: 0, next: first.clamp(4096, READ_AHEAD) }
    }

    /// Whether the chunk at hand holds the byte at `pos`.
    fn holds(&self, pos: u64) -> bool {
        pos >= self.chunk_start && pos < self.chunk_start + self.chunk.len() as u64
    }

    /// Whether the chunk at hand is a buffer of its own (read for this window), not borrowed.
    fn owned(&self) -> bool {
        matches!(self.chunk, Cow::Owned(_))
    }

    /// The bytes from `pos` to the end of the current chunk (reading a new one when `pos` is
    /// outside it); empty at the end of the file.
    fn at(&mut self, pos: u64) -> std::io::Result<&[u8]> {
        self.load(pos)?;
        Ok(self.here(pos))
    }

    /// Reads a new chunk at `pos` unless the chunk at hand holds it.
    fn load(&mut self, pos: u64) -> std::io::Result<()> {
        if !self.holds(pos) {
            self.chunk = self.source.chunk_at(pos, self.next)?;
            self.chunk_start = pos;
            self.next = (self.next * 2).min(READ_AHEAD);
        }
        Ok(())
    }

    /// The bytes of the chunk at hand from `pos` on (empty when it does not hold `pos`).
    fn here(&self, pos: u64) -> &[u8] {
        let skip = pos.checked_sub(self.chunk_start).and_then(|at| usize::try_from(at).ok());
        self.chunk.get(skip.unwrap_or(usize::MAX)..).unwrap_or_default()
    }
}

/// The byte offset where line `n` starts.
pub(super) fn line_start<S: ByteSource + ?Sized>(
    cursor: &mut Cursor<'_, S>,
    index: &LineIndex,
    n: u64,
) -> std::io::Result<u64> {
    if let Some(offset) = index.exact(n) {
        return Ok(offset);
    }
    let cp = index.checkpoint_for(n);
    let mut pos = cp.offset;
    let mut line = cp.line;
    while line < n {
        let rest = cursor.at(pos)?;
        if rest.is_empty() {
            return Err(eof());
        }
        match memchr::memchr(b'\n', rest) {
            Some(i) => {
                pos += i as u64 + 1;
                line += 1;
            }
            None => pos += rest.len() as u64,
        }
    }
    Ok(pos)
}

/// The length of line `n` (of `total`), which starts at `start` and of which `seen` bytes are
/// known not to hold its end: a jump to the next line's checkpoint when there is one, else a
/// scan for its newline (nothing is kept).
pub(super) fn line_length<S: ByteSource + ?Sized>(
    cursor: &mut Cursor<'_, S>,
    index: &LineIndex,
    n: u64,
    total: u64,
    start: u64,
    seen: u64,
) -> std::io::Result<u64> {
    if let Some(next) = index.exact(n + 1) {
        return Ok(next - 1 - start);
    }
    let mut len = seen;
    loop {
        let rest = cursor.at(start + len)?;
        if rest.is_empty() {
            // End of file without a final newline.
            return if n < total { Err(eof()) } else { Ok(len) };
        }
        match memchr::memchr(b'\n', rest) {
            Some(i) => return Ok(len + i as u64),
            None => len += rest.len() as u64,
        }
    }
}

/// Exactly the bytes of `word` that are `\n`, as their high bits.
#[inline]
pub(super) fn newline_bits(word: u64) -> u64 {
    const LOW: u64 = u64::from_ne_bytes([0x7F; 8]);
    let x = word ^ u64::from_ne_bytes([b'\n'; 8]);
    !((x & LOW).wrapping_add(LOW) | x | LOW)
}

/// The positions of the `\n`s in `bytes` from some offset on, in order: eight bytes at a time,
/// one step per newline found (no branch per byte, no call per line).
pub(super) struct Newlines<'b> {
    bytes: &'b [u8],
    /// Where the next word starts.
    next: usize,
    /// Where the current word starts, and its newlines not yet given.
    base: usize,
    bits: u64,
}

impl<'b> Newlines<'b> {
    pub(super) fn new(bytes: &'b [u8], from: usize) -> Self {
        Self { bytes, next: from, base: from, bits: 0 }
    }
}

impl Iterator for Newlines<'_> {
    type Item = usize;

    #[inline]
    fn next(&mut self) -> Option<usize> {
        while self.bits == 0 {
            let len = self.bytes.len();
            if self.next >= len {
                return None;
            }
            let mut word = [0u8; 8];
            if self.next + 8 <= len {
                word.copy_from_slice(&self.bytes[self.next..self.next + 8]);
            } else {
                word[..len - self.next].copy_from_slice(&self.bytes[self.next..]);
            }
            self.base = self.next;
            self.bits = newline_bits(u64::from_le_bytes(word));
            self.next += 8;
        }
        let at = self.base + (self.bits.trailing_zeros() / 8) as usize;
        self.bits &= self.bits - 1;
        Some(at)
    }
}

/// The usual part of [`window`]: takes in place, from line `*n` at `*pos` on, the lines that
/// end in the chunk at hand, need no cut and fit the budget, stopping before the first that
/// does not (the general path then decides about it, as it would have). `true`: line `last`
/// was taken. The lines' ends come from `ends` when the index keeps them (no search at all;
/// a run of them taken at once when the request can say its overhead at once), else they are
/// found eight bytes at a time.
pub(super) fn take_plain_lines<S: ByteSource + ?Sized>(
    cursor: &mut Cursor<'_, S>,
    kept: Option<&LineEnds>,
    lines: &mut RawLines,
    request: &WindowRequest,
    last: u64,
    at_line: &mut Progress,
) -> std::io::Result<bool> {
    if !cursor.holds(at_line.pos) {
        lines.flush(cursor);
        cursor.load(at_line.pos)?;
    }
    let (start, owned) = (cursor.chunk_start, cursor.owned());
    let chunk: &[u8] = &cursor.chunk;
    let at_in_chunk = |pos: u64| {
        pos.checked_sub(start).and_then(|at| usize::try_from(at).ok()).filter(|&at| at < chunk.len())
    };
    let Some(mut at) = at_in_chunk(at_line.pos) else {
        return Ok(false);
    };
    let ends = kept.map(LineEnds::offsets);
    if let (Some(kept), Some(lines_overhead)) = (kept, request.overhead_of_lines) {
        let from = usize::try_from(at_line.n - 1).unwrap_or(usize::MAX);
        let plain = Plain { chunk, start, owned, at, request, last };
        let ends = kept.offsets().get(from..).unwrap_or_default();
        if plain.take_known(ends, kept.after_cr(), lines_overhead, lines, at_line) {
            return Ok(true);
        }
        // The lines after those taken (if any) one by one, from where the run stopped.
        let Some(next) = at_in_chunk(at_line.pos) else {
            return Ok(false);
        };
        at = next;
    }
    let plain = Plain { chunk, start, owned, at, request, last };
    Ok(match ends {
        Some(ends) => {
            let chunk_end = start + chunk.len() as u64;
            let from = usize::try_from(at_line.n - 1).unwrap_or(usize::MAX);
            let known = ends
                .get(from..)
                .unwrap_or_default()
                .iter()
                .map(|&nl| u64::from(nl))
                .take_while(|&nl| nl < chunk_end)
                .map(|nl| usize::try_from(nl - start).unwrap_or(usize::MAX));
            plain.take(known, lines, at_line)
        }
        None => plain.take(Newlines::new(chunk, at), lines, at_line),
    })
}

/// Where a window's cut is: the number of the next line, where it starts, and the budget used.
pub(super) struct Progress {
    n: u64,
    pos: u64,
    used: u64,
}

/// The chunk [`take_plain_lines`] takes lines from, and what it takes them for.
pub(super) struct Plain<'a> {
    chunk: &'a [u8],
    /// Where the chunk starts in the file, and whether it is a buffer read for this window.
    start: u64,
    owned: bool,
    /// Where line `n` starts in the chunk.
    at: usize,
    request: &'a WindowRequest,
    last: u64,
}

impl Plain<'_> {
    /// Takes at once, from line `n` on, the lines whose kept `ends` (from line `n`'s on) lie in
    /// the chunk and that surely fit the budget: the most lines whose cost counted from their
    /// ends alone (a `\r` before each newline counted as a byte of its line, which can only
    /// overstate it) is within what is left of it, found by halving; `overhead_of_lines` gives
    /// their overhead at once. Each is then only checked (its end after its start and in the
    /// chunk, no cut needed) and its bounds pushed; the first that fails a check stops the run,
    /// and what the lines cost exactly is counted once. Unless some `\n` of the file follows a
    /// `\r` (`after_cr`), the bounds are the ends themselves and no byte of the chunk is read
    /// (else each line's last byte is looked at, and its end is checked to be a `\n`); the ends
    /// are this version's, and a file changed under its index is told by its fingerprint after
    /// the cut (its window then discarded), as a line's bytes are checked as UTF-8 with the
    /// window's. `true`: line `last` was taken; else `at_line` says where the line-by-line path
    /// goes on (nothing taken: where it was).
    fn take_known(
        &self,
        ends: &[u32],
        after_cr: bool,
        overhead_of_lines: fn(u64, u64) -> u64,
        lines: &mut RawLines,
        at_line: &mut Progress,
    ) -> bool {
        let Plain { chunk, start, owned, at, request, last } = *self;
        let first = at_line.n;
        let wanted = usize::try_from(last.saturating_sub(first).saturating_add(1)).unwrap_or(usize::MAX);
        let ends = ends.get(..wanted.min(ends.len())).unwrap_or_default();
        let chunk_end = start + chunk.len() as u64;
        let ends = ends.get(..ends.partition_point(|&nl| u64::from(nl) < chunk_end)).unwrap_or_default();
        let remaining = request.max_bytes.saturating_sub(at_line.used);
        // What lines `first..first + k` cost at most (`k >= 1`), from the `\n` ending the last.
        let at_most = |k: usize| {
            let span = ends.get(k - 1).map_or(u64::MAX, |&nl| u64::from(nl).saturating_sub(at_line.pos));
            let text = span.saturating_sub(k as u64 - 1);
            text.saturating_add(overhead_of_lines(first, first + k as u64 - 1))
        };
        let (mut fit, mut over) = (0, ends.len() + 1);
        while over - fit > 1 {
            let mid = fit + (over - fit) / 2;
            if at_most(mid) <= remaining {
                fit = mid;
            } else {
                over = mid;
            }
        }
        if fit == 0 {
            return false;
        }
        let cap = request.max_line_chars.map_or(usize::MAX, |chars| chars as usize);
        let run = lines.planned_run(start, owned, at_line.pos);
        // A line's place in the text is its place in the chunk moved by this much (wrapping:
        // the run starts at or before the line).
        let shift = run.at.wrapping_sub(usize::try_from(run.from - start).unwrap_or(usize::MAX));
        let mark = lines.bounds.len();
        lines.bounds.reserve(fit);
        let (mut from, mut begun, mut to, mut bytes) = (at, at, at, 0u64);
        for &nl in ends.get(..fit).unwrap_or_default() {
            let end = u64::from(nl)
                .checked_sub(start)
                .and_then(|end| usize::try_from(end).ok())
                .unwrap_or(usize::MAX);
            if end < from || end >= chunk.len() {
                break;
            }
            let cr = if after_cr {
                if chunk.get(end) != Some(&b'\n') {
                    break;
                }
                usize::from(end > from && chunk.get(end - 1) == Some(&b'\r'))
            } else {
                0
            };
            let len = end - from - cr;
            // No more bytes than the cap means no more characters than the cap: no cut.
            if len > cap {
                break;
            }
            lines.bounds.push((from.wrapping_add(shift), (from + len).wrapping_add(shift)));
            bytes += len as u64;
            (begun, to) = (from, from + len);
            from = end + 1;
        }
        let taken = (lines.bounds.len() - mark) as u64;
        if taken == 0 {
            return false;
        }
        let cost = bytes.saturating_add(overhead_of_lines(first, first + taken - 1));
        debug_assert_eq!(
            overhead_of_lines(first, first + taken - 1),
            (first..first + taken).map(|n| (request.overhead)(n, false)).sum::<u64>(),
            "overhead_of_lines is the sum of overhead"
        );
        if cost > remaining {
            // Only when the ends are not this text's (a file changed under its index, which its
            // fingerprint will tell): leave it all to the line-by-line path.
            lines.bounds.truncate(mark);
            return false;
        }
        lines.run = Some(Run { to: start + to as u64, ..run });
        lines.line_bytes += usize::try_from(bytes).unwrap_or(usize::MAX);
        at_line.used += cost;
        if first + taken - 1 == last {
            at_line.n = last;
            at_line.pos = start + begun as u64;
            return true;
        }
        at_line.n = first + taken;
        at_line.pos = start + from as u64;
        false
    }

    /// Takes lines ending at each of `ends` (positions of `\n`s in the chunk, in order, from the
    /// line at `at` on) while they qualify (see [`take_plain_lines`]).
    #[inline]
    fn take(&self, ends: impl Iterator<Item = usize>, lines: &mut RawLines, at_line: &mut Progress) -> bool {
        let Plain { chunk, start, owned, mut at, request, last } = *self;
        let cap = request.max_line_chars.map_or(usize::MAX, |chars| chars as usize);
        for end in ends {
            // A kept end is where the index says (a file that changed under it is caught after
            // the window is cut, by its fingerprint): here it must only be a `\n` past `at`.
            if end < at || chunk.get(end) != Some(&b'\n') {
                break;
            }
            let line = &chunk[at..end];
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            // No more bytes than the cap means no more characters than the cap: no cut.
            if line.len() > cap {
                break;
            }
            let cost = (line.len() as u64).saturating_add((request.overhead)(at_line.n, false));
            if cost > request.max_bytes.saturating_sub(at_line.used) {
                break;
            }
            at_line.used += cost;
            lines.push_in_chunk(start, owned, at_line.pos, line.len());
            if at_line.n == last {
                return true;
            }
            at_line.n += 1;
            at_line.pos += (end - at) as u64 + 1;
            at = end + 1;
        }
        false
    }
}

/// Cuts the lines `request` asks for out of `source` using `index`: at most `limit` lines
/// from `offset`, stopping before a line that would take the window past `max_bytes` (then
/// `capped`). An `offset` past the end gives no lines. A line longer than `max_line_chars`
/// is cut, and only a prefix of it is read; whole lines are read only as far as the budget
/// could hold them, so no line is ever held in memory beyond the budget.
pub fn window<S: ByteSource + ?Sized>(
    source: &S,
    index: &LineIndex,
    request: &WindowRequest,
) -> std::io::Result<Window> {
    let &WindowRequest { offset, limit, max_line_chars, max_bytes, overhead, fit_first, .. } = request;
    let total = index.total_lines;
    let mut out = Window {
        start_line: offset,
        lines: LineBuf::default(),
        truncated: Vec::new(),
        total_lines: total,
        capped: false,
        oversized: None,
    };
    if total == 0 || offset == 0 || offset > total || limit == 0 {
        return Ok(out);
    }
    let last = offset.saturating_add(limit - 1).min(total);
    let invalid = |_| std::io::Error::new(std::io::ErrorKind::InvalidData, "window is not UTF-8");
    // First read: the window's bytes when the index knows where it starts and ends; else the
    // lines from the checkpoint to the window's end at the file's average line length, with a
    // quarter to spare.
    let guess = match (index.exact(offset), index.exact(last + 1)) {
        (Some(from), Some(to)) if to > from => to - from,
        _ => {
            let lines = last + 1 - index.checkpoint_for(offset).line;
            let average = index.len / total;
            lines.saturating_mul(average).saturating_mul(5) / 4 + 512
        }
    };
    let mut cursor = Cursor::new(source, usize::try_from(guess).unwrap_or(READ_AHEAD));
    let pos = line_start(&mut cursor, index, offset)?;
    // The lines' bytes stay where they were read (see `RawLines`); copied only when a window
    // spans chunks or a line is read across them.
    let mut lines = RawLines {
        text: Vec::new(),
        bounds: Vec::with_capacity(usize::try_from(last + 1 - offset).unwrap_or(0).min(4096)),
        line_bytes: 0,
        run: None,
    };
    // A cut line keeps a prefix long enough for its characters.
    let prefix_cap = max_line_chars.map(prefix_bytes);
    let mut at_line = Progress { n: offset, pos, used: 0 };
    loop {
        if take_plain_lines(&mut cursor, index.line_ends_kept(), &mut lines, request, last, &mut at_line)? {
            break;
        }
        let Progress { n, pos, used } = at_line;
        let remaining = max_bytes.saturating_sub(used);
        // How much of the line to keep: a cut line's prefix; of a whole line, what the budget
        // could hold plus a `\r` and one byte more (which shows that it does not fit).
        let keep =
            prefix_cap.unwrap_or_else(|| usize::try_from(remaining.saturating_add(2)).unwrap_or(usize::MAX));
        // Read the line, or as much of it as is kept.
        let mut prefix: Vec<u8> = Vec::new();
        let mut seen = 0u64;
        let mut ended = false;
        if !cursor.holds(pos) {
            lines.flush(&cursor);
            cursor.load(pos)?;
        }
        let (chunk_start, owned) = (cursor.chunk_start, cursor.owned());
        let first = cursor.here(pos);
        let (mut text, mut cut, in_chunk): (&[u8], bool, bool) = match newline(first).filter(|&i| i <= keep) {
            // The usual case: the whole line lies in the chunk at hand (its UTF-8 is checked
            // with the whole window's, unless it has to be cut at a character).
            Some(i) => {
                seen = i as u64;
                ended = true;
                let body = &first[..i];
                let body = body.strip_suffix(b"\r").unwrap_or(body);
                match max_line_chars {
                    Some(max) if body.len() > max as usize => {
                        let (text, cut) = decode_line(&first[..i], false, max_line_chars).map_err(invalid)?;
                        (text.as_bytes(), cut, true)
                    }
                    _ => (body, false, true),
                }
            }
            None => {
                lines.flush(&cursor);
                loop {
                    let rest = cursor.at(pos + seen)?;
                    if rest.is_empty() {
                        // End of file without a final newline.
                        if n < total {
                            return Err(eof());
                        }
                        ended = true;
                        break;
                    }
                    let (body, found) = match memchr::memchr(b'\n', rest) {
                        Some(i) => (&rest[..i], true),
                        None => (rest, false),
                    };
                    let room = keep.saturating_sub(prefix.len());
                    prefix.extend_from_slice(&body[..body.len().min(room)]);
                    seen += body.len() as u64;
                    if found {
                        ended = true;
                        break;
                    }
                    if prefix.len() >= keep {
                        break;
                    }
                }
                let (text, cut) = decode_line(&prefix, !ended || seen > prefix.len() as u64, max_line_chars)
                    .map_err(invalid)?;
                (text.as_bytes(), cut, false)
            }
        };
        // A whole line that was not read whole is longer than the budget.
        let too_long = max_line_chars.is_none() && cut;
        let cost = (text.len() as u64).saturating_add(overhead(n, cut));
        if !too_long && cost <= remaining {
            at_line.used += cost;
        } else if lines.is_empty() && fit_first {
            let whole = std::str::from_utf8(text).map_err(|_| invalid(NotText::InvalidUtf8(0)))?;
            text = cut_to_bytes(whole, remaining.saturating_sub(overhead(n, true))).as_bytes();
            cut = true;
            out.capped = n < last;
        } else if lines.is_empty() {
            let bytes = if ended { seen } else { line_length(&mut cursor, index, n, total, pos, seen)? };
            out.oversized = Some(Oversized { line: n, bytes });
            break;
        } else {
            out.capped = true;
            break;
        }
        if cut {
            out.truncated.push(n);
        }
        if in_chunk {
            lines.push_in_chunk(chunk_start, owned, pos, text.len());
        } else {
            lines.push_copied(&cursor, text);
        }
        if out.capped || n == last {
            break;
        }
        let len = if ended { seen } else { line_length(&mut cursor, index, n, total, pos, seen)? };
        at_line.pos += len + 1;
        at_line.n += 1;
    }
    out.lines = lines.finish(&mut cursor).map_err(|_| invalid(NotText::InvalidUtf8(0)))?;
    Ok(out)
}
