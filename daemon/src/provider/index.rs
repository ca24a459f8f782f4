//! Text scanning and line windows. One pass over a file's bytes computes its version, checks it
//! is text (UTF-8, no NUL) and builds a sparse line index; a window is then cut from any byte
//! source at the cost of the window, not the file.
//!
//! The index keeps a checkpoint (line number, byte offset) at least every [`CHECKPOINT_LINES`]
//! lines and at the first line start in every [`CHECKPOINT_BLOCK`] bytes, so finding any line
//! start means scanning forward from its checkpoint over fewer than 64 lines and less than
//! 1 MiB — while the index costs 16 bytes per 64 lines instead of 8 bytes per line.

use std::borrow::Cow;

use memchr::memchr_iter;

use super::version::Version;

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// At most this many lines lie between two checkpoints.
pub const CHECKPOINT_LINES: u64 = 64;
/// Every block of this many bytes that holds a line start holds a checkpoint.
pub const CHECKPOINT_BLOCK: u64 = 1024 * 1024;

/// Lines of a window longer than this many characters are cut to it (the protocol advertises
/// the same number as `limits.readLineMaxChars`; `tools/render.rs` checks they agree).
pub const LINE_MAX_CHARS: u32 = 2000;

/// The longest prefix of a line, in bytes, that can hold `LINE_MAX_CHARS` characters plus
/// one more (to know whether the line was cut) and a trailing `\r`.
const LINE_PREFIX_BYTES: usize = (LINE_MAX_CHARS as usize + 1) * 4 + 1;

/// Why a file is not text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotText {
    /// It contains a NUL byte at this offset (binary).
    Nul(u64),
    /// It is not valid UTF-8 at this byte offset.
    InvalidUtf8(u64),
}

impl NotText {
    fn offset(self) -> u64 {
        match self {
            Self::Nul(at) | Self::InvalidUtf8(at) => at,
        }
    }
}

impl std::fmt::Display for NotText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Nul(at) => write!(f, "it contains a NUL byte at offset {at} (a binary file)"),
            Self::InvalidUtf8(at) => write!(f, "it is not valid UTF-8 (at byte {at})"),
        }
    }
}

/// One indexed line start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checkpoint {
    /// 1-based line number.
    pub line: u64,
    /// Byte offset where the line starts.
    pub offset: u64,
}

/// A text file's line structure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineIndex {
    /// Whether the file starts with a UTF-8 byte-order mark (not shown, kept on write).
    pub bom: bool,
    /// File length in bytes.
    pub len: u64,
    /// Number of lines: `"a\nb\n"` and `"a\nb"` have 2, `""` has 0.
    pub total_lines: u64,
    /// Sorted by line (and offset); the first is line 1 when the file has lines.
    checkpoints: Vec<Checkpoint>,
}

impl LineIndex {
    /// Number of lines.
    pub fn total_lines(&self) -> u64 {
        self.total_lines
    }

    /// Memory the index holds, for cache accounting.
    pub fn heap_bytes(&self) -> usize {
        self.checkpoints.capacity() * std::mem::size_of::<Checkpoint>()
    }

    /// The last checkpoint at or before line `n`.
    fn checkpoint_for(&self, n: u64) -> Checkpoint {
        let at = self.checkpoints.partition_point(|c| c.line <= n);
        self.checkpoints[at.saturating_sub(1)]
    }

    /// The start of line `n` if it is a checkpoint.
    fn exact(&self, n: u64) -> Option<u64> {
        self.checkpoints.binary_search_by_key(&n, |c| c.line).ok().map(|i| self.checkpoints[i].offset)
    }
}

/// Builds checkpoints from line starts seen in order.
#[derive(Debug)]
struct Checkpoints {
    list: Vec<Checkpoint>,
    /// Line starts seen since the last checkpoint.
    since: u64,
    /// Block of the last line start seen.
    last_block: u64,
}

impl Checkpoints {
    fn new() -> Self {
        Self { list: Vec::new(), since: 0, last_block: u64::MAX }
    }

    /// Records line start `offset`, the `line`-th line start of this sequence (1-based within
    /// the sequence; the first one is always a checkpoint).
    fn see(&mut self, line: u64, offset: u64) {
        let block = offset / CHECKPOINT_BLOCK;
        if self.list.is_empty() || self.since + 1 >= CHECKPOINT_LINES || block != self.last_block {
            self.list.push(Checkpoint { line, offset });
            self.since = 0;
        } else {
            self.since += 1;
        }
        self.last_block = block;
    }
}

/// Incremental UTF-8 and NUL checking over chunks (a character may straddle two chunks).
#[derive(Debug, Default)]
struct TextCheck {
    carry: Vec<u8>,
    failure: Option<NotText>,
}

/// Whether bytes held whole in memory are text (UTF-8 without NUL), as a scan would decide,
/// without building a line index.
pub fn check_text(bytes: &[u8]) -> Result<(), NotText> {
    let mut check = TextCheck::default();
    check.feed(0, bytes);
    check.finish(bytes.len() as u64).map_or(Ok(()), Err)
}

/// Whether `head`, the first bytes of a file, can begin a text file; when not, what a scan of
/// the whole file would report. `whole` says the file ends there; otherwise a character cut by
/// the end of `head` is not held against it (its next bytes are in the rest of the file).
pub fn check_head(head: &[u8], whole: bool) -> Result<(), NotText> {
    let mut check = TextCheck::default();
    check.feed(0, head);
    let failure = if whole { check.finish(head.len() as u64) } else { check.failure };
    failure.map_or(Ok(()), Err)
}

impl TextCheck {
    fn feed(&mut self, pos: u64, chunk: &[u8]) {
        if self.failure.is_some() {
            return;
        }
        if let Some(at) = memchr::memchr(0, chunk) {
            // Report a NUL only if the bytes before it are valid text.
            self.check_utf8(pos, &chunk[..at]);
            if self.failure.is_none() {
                self.failure = Some(NotText::Nul(pos + at as u64));
            }
            return;
        }
        self.check_utf8(pos, chunk);
    }

    fn check_utf8(&mut self, pos: u64, chunk: &[u8]) {
        let mut data = chunk;
        let mut offset = pos;
        if !self.carry.is_empty() {
            let take = (4 - self.carry.len()).min(data.len());
            let mut joined = std::mem::take(&mut self.carry);
            let carried = joined.len();
            joined.extend_from_slice(&data[..take]);
            match std::str::from_utf8(&joined) {
                Ok(_) => {
                    data = &data[take..];
                    offset += take as u64;
                }
                Err(e) if e.valid_up_to() >= carried => {
                    let used = e.valid_up_to() - carried;
                    data = &data[used..];
                    offset += used as u64;
                }
                Err(e) if e.error_len().is_none() && take == data.len() => {
                    self.carry = joined;
                    return;
                }
                Err(_) => {
                    self.failure = Some(NotText::InvalidUtf8(pos - carried as u64));
                    return;
                }
            }
        }
        if let Err(e) = std::str::from_utf8(data) {
            match e.error_len() {
                None => self.carry = data[e.valid_up_to()..].to_vec(),
                Some(_) => self.failure = Some(NotText::InvalidUtf8(offset + e.valid_up_to() as u64)),
            }
        }
    }

    fn finish(mut self, len: u64) -> Option<NotText> {
        if self.failure.is_none() && !self.carry.is_empty() {
            self.failure = Some(NotText::InvalidUtf8(len - self.carry.len() as u64));
        }
        self.failure
    }
}

/// Feeds a file's bytes through in order; yields its version and, if it is text, its index.
#[derive(Debug)]
pub struct Scanner {
    hasher: blake3::Hasher,
    pos: u64,
    text: TextCheck,
    newlines: u64,
    last_newline: Option<u64>,
    checkpoints: Checkpoints,
    head: Vec<u8>,
}

impl Default for Scanner {
    fn default() -> Self {
        Self::new()
    }
}

impl Scanner {
    /// A scanner at offset 0.
    pub fn new() -> Self {
        Self {
            hasher: blake3::Hasher::new(),
            pos: 0,
            text: TextCheck::default(),
            newlines: 0,
            last_newline: None,
            checkpoints: Checkpoints::new(),
            head: Vec::with_capacity(3),
        }
    }

    /// Scans the next chunk of the file.
    pub fn feed(&mut self, chunk: &[u8]) {
        self.hasher.update(chunk);
        if self.head.len() < 3 {
            let take = (3 - self.head.len()).min(chunk.len());
            self.head.extend_from_slice(&chunk[..take]);
        }
        self.text.feed(self.pos, chunk);
        if self.text.failure.is_none() {
            for i in memchr_iter(b'\n', chunk) {
                let nl = self.pos + i as u64;
                self.newlines += 1;
                self.last_newline = Some(nl);
                // The line after this newline is line `newlines + 1`; it is recorded even if it
                // turns out to be past the end (dropped in `finish`).
                self.checkpoints.see(self.newlines + 1, nl + 1);
            }
        }
        self.pos += chunk.len() as u64;
    }

    /// The version, and the line index or why the bytes are not text.
    pub fn finish(self) -> (Version, Result<LineIndex, NotText>) {
        let version = Version::from_hash(self.hasher.finalize());
        let len = self.pos;
        if let Some(why) = self.text.finish(len) {
            return (version, Err(why));
        }
        let bom = self.head.as_slice() == BOM;
        let index = assemble(bom, len, self.newlines, self.last_newline, vec![self.checkpoints.list]);
        (version, Ok(index))
    }

    /// Scans a whole buffer in one thread.
    pub fn scan(bytes: &[u8]) -> (Version, Result<LineIndex, NotText>) {
        let mut scanner = Self::new();
        scanner.feed(bytes);
        scanner.finish()
    }
}

/// Puts an index together from per-part checkpoint lists whose line numbers are already global.
fn assemble(
    bom: bool,
    len: u64,
    newlines: u64,
    last_newline: Option<u64>,
    parts: Vec<Vec<Checkpoint>>,
) -> LineIndex {
    let first = if bom { BOM.len() as u64 } else { 0 };
    if len <= first {
        return LineIndex { bom, len, total_lines: 0, checkpoints: Vec::new() };
    }
    let final_newline = last_newline.is_some_and(|nl| nl + 1 == len);
    let total_lines = newlines + u64::from(!final_newline);
    let mut checkpoints = Vec::with_capacity(parts.iter().map(Vec::len).sum::<usize>() + 1);
    checkpoints.push(Checkpoint { line: 1, offset: first });
    for part in parts {
        checkpoints.extend(part.into_iter().filter(|c| c.offset < len && c.line > 1));
    }
    checkpoints.dedup_by_key(|c| c.line);
    checkpoints.shrink_to_fit();
    LineIndex { bom, len, total_lines, checkpoints }
}

/// Scans bytes already in memory (or mapped) on every core: the hash with blake3's parallel
/// implementation, the text check and the line index over parts of the buffer, at once.
pub fn scan_parallel(bytes: &[u8]) -> (Version, Result<LineIndex, NotText>) {
    scan_parallel_until(bytes, &|| false).unwrap_or_else(|| Scanner::scan(bytes))
}

/// [`scan_parallel`] that gives up (`None`) as soon as `abandon` says so, checked between
/// slices of the work: a scan of a mapping that was torn need not touch every page.
pub fn scan_parallel_until(
    bytes: &[u8],
    abandon: &(dyn Fn() -> bool + Sync),
) -> Option<(Version, Result<LineIndex, NotText>)> {
    const MIN_PART: usize = 4 * 1024 * 1024;
    if bytes.len() < 2 * MIN_PART {
        return Some(Scanner::scan(bytes));
    }
    let parts = (rayon::current_num_threads() * 4).clamp(2, 64).min(bytes.len() / MIN_PART);
    // Split points moved forward to character boundaries, so each part's UTF-8 is checked whole.
    let mut cuts = vec![0usize];
    for i in 1..parts {
        let mut at = bytes.len() / parts * i;
        while at < bytes.len() && (bytes[at] & 0xC0) == 0x80 && at - bytes.len() / parts * i < 3 {
            at += 1;
        }
        cuts.push(at.max(*cuts.last().unwrap_or(&0)));
    }
    cuts.push(bytes.len());

    struct Part {
        failure: Option<NotText>,
        newlines: u64,
        last_newline: Option<u64>,
        checkpoints: Vec<Checkpoint>,
    }
    let scan_part = |(start, end): (usize, usize)| -> Part {
        if abandon() {
            return Part { failure: None, newlines: 0, last_newline: None, checkpoints: Vec::new() };
        }
        let chunk = &bytes[start..end];
        let pos = start as u64;
        let mut text = TextCheck::default();
        text.feed(pos, chunk);
        let failure = text.finish(end as u64);
        let mut points = Checkpoints::new();
        let mut newlines = 0;
        let mut last_newline = None;
        if failure.is_none() {
            for i in memchr_iter(b'\n', chunk) {
                newlines += 1;
                let nl = pos + i as u64;
                last_newline = Some(nl);
                // Part-relative numbering; made global below.
                points.see(newlines + 1, nl + 1);
            }
        }
        Part { failure, newlines, last_newline, checkpoints: points.list }
    };
    let ranges: Vec<(usize, usize)> = cuts.windows(2).map(|w| (w[0], w[1])).collect();
    let (hash, parts) = rayon::join(
        || {
            const SLICE: usize = 64 * 1024 * 1024;
            let mut hasher = blake3::Hasher::new();
            for slice in bytes.chunks(SLICE) {
                if abandon() {
                    break;
                }
                hasher.update_rayon(slice);
            }
            hasher.finalize()
        },
        || {
            use rayon::prelude::*;
            ranges.par_iter().map(|&r| scan_part(r)).collect::<Vec<Part>>()
        },
    );
    if abandon() {
        return None;
    }
    let version = Version::from_hash(hash);
    if let Some(failure) = parts.iter().filter_map(|p| p.failure).min_by_key(|f| f.offset()) {
        return Some((version, Err(failure)));
    }
    let mut before = 0u64;
    let mut last_newline = None;
    let mut lists = Vec::with_capacity(parts.len());
    for part in parts {
        let shift = before;
        lists.push(
            part.checkpoints
                .into_iter()
                .map(|c| Checkpoint { line: c.line + shift, offset: c.offset })
                .collect(),
        );
        before += part.newlines;
        last_newline = part.last_newline.or(last_newline);
    }
    let bom = bytes.starts_with(BOM);
    Some((version, Ok(assemble(bom, bytes.len() as u64, before, last_newline, lists))))
}

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

/// A window of decoded lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    /// 1-based number of the first line.
    pub start_line: u64,
    /// The lines, without terminators and `\r`, cut at the character cap.
    pub lines: Vec<String>,
    /// 1-based numbers of the lines that were cut.
    pub truncated: Vec<u64>,
    /// Lines in the whole file.
    pub total_lines: u64,
}

/// Decodes one line's leading bytes: drop a trailing `\r`, cut at the character cap.
fn decode_line(bytes: &[u8], full_len: u64) -> Result<(String, bool), NotText> {
    let cut_by_read = full_len > bytes.len() as u64;
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
    // No more bytes than the cap means no more characters than the cap: skip counting.
    if text.len() <= LINE_MAX_CHARS as usize {
        return Ok((text.to_owned(), cut_by_read));
    }
    match text.char_indices().nth(LINE_MAX_CHARS as usize) {
        Some((at, _)) => Ok((text[..at].to_owned(), true)),
        None => Ok((text.to_owned(), cut_by_read)),
    }
}

/// How many bytes to ask a source for at once.
const READ_AHEAD: usize = 256 * 1024;

fn eof() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the file is shorter than its index")
}

/// Reads forward through a source, keeping one chunk so that consecutive lines come from one
/// read (a mapping or a buffer is one chunk; a file is read 256 KiB at a time).
struct Cursor<'a, S: ByteSource + ?Sized> {
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

    /// The bytes from `pos` to the end of the current chunk (reading a new one when `pos` is
    /// outside it); empty at the end of the file.
    fn at(&mut self, pos: u64) -> std::io::Result<&[u8]> {
        let end = self.chunk_start + self.chunk.len() as u64;
        if pos < self.chunk_start || pos >= end {
            self.chunk = self.source.chunk_at(pos, self.next)?;
            self.chunk_start = pos;
            self.next = (self.next * 2).min(READ_AHEAD);
        }
        let skip = usize::try_from(pos - self.chunk_start).unwrap_or(usize::MAX).min(self.chunk.len());
        Ok(&self.chunk[skip..])
    }
}

/// The byte offset where line `n` starts.
fn line_start<S: ByteSource + ?Sized>(
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

/// Cuts lines `offset..offset + limit` out of `source` using `index`. An `offset` past the
/// end gives no lines.
pub fn window<S: ByteSource + ?Sized>(
    source: &S,
    index: &LineIndex,
    offset: u64,
    limit: u64,
) -> std::io::Result<Window> {
    let total = index.total_lines;
    let mut out = Window { start_line: offset, lines: Vec::new(), truncated: Vec::new(), total_lines: total };
    if total == 0 || offset == 0 || offset > total || limit == 0 {
        return Ok(out);
    }
    let last = offset.saturating_add(limit - 1).min(total);
    let invalid = |_| std::io::Error::new(std::io::ErrorKind::InvalidData, "window is not UTF-8");
    // First read: the lines from the checkpoint to the window's end at the file's average line
    // length, with a quarter to spare.
    let lines = last + 1 - index.checkpoint_for(offset).line;
    let average = index.len / total;
    let guess = lines.saturating_mul(average).saturating_mul(5) / 4 + 512;
    let mut cursor = Cursor::new(source, usize::try_from(guess).unwrap_or(READ_AHEAD));
    let mut pos = line_start(&mut cursor, index, offset)?;
    for n in offset..=last {
        // Read the line: keep its first LINE_PREFIX_BYTES, find its end.
        let mut prefix: Vec<u8> = Vec::new();
        let mut len = 0u64;
        loop {
            let rest = cursor.at(pos + len)?;
            if rest.is_empty() {
                // End of file without a final newline.
                if n < total {
                    return Err(eof());
                }
                break;
            }
            let (body, ended) = match memchr::memchr(b'\n', rest) {
                Some(i) => (&rest[..i], true),
                None => (rest, false),
            };
            let room = LINE_PREFIX_BYTES.saturating_sub(prefix.len());
            prefix.extend_from_slice(&body[..body.len().min(room)]);
            len += body.len() as u64;
            if ended {
                break;
            }
            // A very long line: jump to the next line's checkpoint when there is one.
            if prefix.len() >= LINE_PREFIX_BYTES
                && let Some(next) = index.exact(n + 1)
            {
                len = next - 1 - pos;
                break;
            }
        }
        let (line, cut) = decode_line(&prefix, len).map_err(invalid)?;
        if cut {
            out.truncated.push(n);
        }
        out.lines.push(line);
        pos += len + 1;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &[u8], offset: u64, limit: u64) -> Window {
        let (_, index) = Scanner::scan(text);
        window(text, &index.unwrap(), offset, limit).unwrap()
    }

    #[test]
    fn line_counts() {
        let count = |t: &[u8]| Scanner::scan(t).1.unwrap().total_lines();
        assert_eq!(count(b""), 0);
        assert_eq!(count(b"\n"), 1);
        assert_eq!(count(b"a"), 1);
        assert_eq!(count(b"a\nb"), 2);
        assert_eq!(count(b"a\nb\n"), 2);
        assert_eq!(count(b"a\n\nb\n"), 3);
        assert_eq!(count(b"\xEF\xBB\xBF"), 0);
        assert_eq!(count(b"\xEF\xBB\xBFx\n"), 1);
    }

    #[test]
    fn windows_hide_bom_and_cr_and_keep_empty_lines() {
        let w = lines(b"\xEF\xBB\xBFone\r\ntwo\r\n\r\nfour", 1, 10);
        assert_eq!(w.lines, ["one", "two", "", "four"]);
        assert_eq!(w.total_lines, 4);
        let w = lines(b"a\nb\nc\n", 2, 1);
        assert_eq!((w.start_line, w.lines.clone()), (2, vec!["b".to_owned()]));
        assert!(lines(b"a\n", 2, 5).lines.is_empty());
    }

    #[test]
    fn long_lines_are_cut_at_the_character_cap() {
        let long = "é".repeat(2500);
        let text = format!("short\n{long}\n{}\r\n", "x".repeat(2000));
        let w = lines(text.as_bytes(), 1, 3);
        assert_eq!(w.lines[1].chars().count(), 2000);
        assert_eq!(w.lines[2].len(), 2000, "exactly the cap plus \\r is not cut");
        assert_eq!(w.truncated, vec![2]);
    }

    #[test]
    fn not_text_is_found_across_chunk_boundaries() {
        let check = |bytes: &[u8], chunk: usize| {
            let mut s = Scanner::new();
            for c in bytes.chunks(chunk) {
                s.feed(c);
            }
            s.finish().1.err()
        };
        let multibyte = "ab日本語✓é".as_bytes();
        for chunk in 1..8 {
            assert_eq!(check(multibyte, chunk), None, "chunk {chunk}");
            assert_eq!(check(b"ab\xffcd", chunk), Some(NotText::InvalidUtf8(2)), "chunk {chunk}");
            assert_eq!(check(b"abc\0", chunk), Some(NotText::Nul(3)), "chunk {chunk}");
            assert_eq!(check(b"ab\xe6\x97", chunk), Some(NotText::InvalidUtf8(2)), "chunk {chunk}");
        }
    }

    #[test]
    fn a_head_is_judged_as_the_whole_scan_would_judge_it() {
        let full = |bytes: &[u8]| Scanner::scan(bytes).1.err();
        // A character cut by the head's end is fine unless the file ends there.
        let text = "abc日本".as_bytes();
        let cut = &text[..text.len() - 1];
        assert_eq!(check_head(cut, false), Ok(()));
        assert_eq!(check_head(cut, true).err(), full(cut));
        for bad in [&b"ab\0cd"[..], b"ab\xffcd", b"\xEF\xBB\xBF\0", b"a\xe6\x97x"] {
            let expected = full(bad);
            assert!(expected.is_some());
            assert_eq!(check_head(bad, false).err(), expected, "{bad:?}");
            assert_eq!(check_head(bad, true).err(), expected, "{bad:?}");
        }
        assert_eq!(check_head(b"plain text\n", false), Ok(()));
    }

    #[test]
    fn sequential_chunked_and_parallel_scans_agree() {
        let data: Vec<u8> = (0..3_000_000u32).flat_map(|i| format!("line {i} é\n").into_bytes()).collect();
        let whole = Scanner::scan(&data);
        let mut s = Scanner::new();
        for c in data.chunks(777_777) {
            s.feed(c);
        }
        let chunked = s.finish();
        assert_eq!(chunked.0, whole.0);
        assert_eq!(whole.0, Version::of(&data));
        let parallel = scan_parallel(&data);
        assert_eq!(parallel.0, whole.0);
        let (a, b, c) = (whole.1.unwrap(), chunked.1.unwrap(), parallel.1.unwrap());
        assert_eq!((a.total_lines, b.total_lines, c.total_lines), (3_000_000, 3_000_000, 3_000_000));
        for n in [1, 2, 63, 64, 65, 1_000_001, 2_999_999, 3_000_000] {
            let expected = format!("line {} é", n - 1);
            for index in [&a, &b, &c] {
                assert_eq!(
                    window(data.as_slice(), index, n, 1).unwrap().lines,
                    std::slice::from_ref(&expected),
                    "line {n}"
                );
            }
        }
        let mut bad = data.clone();
        bad[20_000_000] = 0xff;
        assert_eq!(scan_parallel(&bad).1.err(), Scanner::scan(&bad).1.err());
    }

    #[test]
    fn index_stays_small_and_huge_lines_are_jumped() {
        let huge = "x".repeat(3 * 1024 * 1024);
        let text = format!("a\n{huge}\nb\nc");
        let (_, index) = Scanner::scan(text.as_bytes());
        let index = index.unwrap();
        assert!(index.checkpoints.len() <= 4, "{:?}", index.checkpoints);
        let w = window(text.as_bytes(), &index, 2, 3).unwrap();
        assert_eq!(w.lines[0].len(), 2000);
        assert_eq!(&w.lines[1..], ["b", "c"]);
        assert_eq!(w.truncated, vec![2]);
        let many: String = (0..100_000).map(|i| format!("{i}\n")).collect();
        let index = Scanner::scan(many.as_bytes()).1.unwrap();
        assert!(index.heap_bytes() < 100_000 / 64 * 16 * 2, "{}", index.heap_bytes());
    }

    #[test]
    fn every_window_equals_the_same_slice_of_the_whole() {
        let text = "α\r\nβ\n\nlast without newline";
        let all: Vec<&str> = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)).collect();
        for offset in 1..=4u64 {
            for limit in 1..=5u64 {
                let w = lines(text.as_bytes(), offset, limit);
                let end = ((offset + limit - 1) as usize).min(all.len());
                assert_eq!(w.lines, all[offset as usize - 1..end], "offset {offset} limit {limit}");
            }
        }
    }
}
