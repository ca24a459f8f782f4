//! Text scanning and line windows. One pass over a file's bytes computes its version, checks it
//! is text (UTF-8, no NUL) and builds a sparse line index; a window is then cut from any byte
//! source at the cost of the window, not the file.
//!
//! The index keeps a checkpoint (line number, byte offset) at least every [`CHECKPOINT_LINES`]
//! lines and at the first line start in every [`CHECKPOINT_BLOCK`] bytes, so finding any line
//! start means scanning forward from its checkpoint over fewer than 64 lines and less than
//! 1 MiB — while the index costs 16 bytes per 64 lines instead of 8 bytes per line.

use std::borrow::Cow;
use std::sync::OnceLock;

use memchr::memchr_iter;

use super::version::Version;

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// At most this many lines lie between two checkpoints.
pub const CHECKPOINT_LINES: u64 = 64;
/// Every block of this many bytes that holds a line start holds a checkpoint.
pub const CHECKPOINT_BLOCK: u64 = 1024 * 1024;

/// The longest prefix of a line, in bytes, that can hold `chars` characters plus one more (to
/// know whether the line was cut) and a trailing `\r`: what a window keeps of a line it cuts.
fn prefix_bytes(chars: u32) -> usize {
    (chars as usize + 1) * 4 + 1
}

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

/// Files up to this size get a dense index of their line ends once they are read warm (see
/// [`LineIndex::ends`]): 4 bytes per line, at most half the file.
pub const DENSE_MAX_BYTES: u64 = 512 * 1024;
/// ... and at least this large: a window of a smaller file is cheap to cut anyway.
pub const DENSE_MIN_BYTES: u64 = 64 * 1024;

/// Bytes of a file read at a time to find its line ends ([`LineIndex::read_line_ends`]): below
/// the allocator's threshold for a mapping of its own, and the file never held whole.
const ENDS_CHUNK: usize = 64 * 1024;

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
    /// Where every `\n` of the file is, in order (so line `n` ends at `ends[n - 1]` and the
    /// next starts after it): set at most once, for a small file read warm (the cache adds it
    /// to an entry it holds, and counts its bytes: see [`LineIndex::ends_bytes`]). A window
    /// of such a file is cut without searching for its lines' ends.
    ends: OnceLock<LineEnds>,
}

/// Where every `\n` of a file is (see [`LineIndex::ends`]), and whether any of them comes
/// right after a `\r` (when none does, a line's bounds are its ends alone: nothing of the file
/// is looked at to cut a window of whole lines).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineEnds {
    at: Box<[u32]>,
    after_cr: bool,
}

impl LineEnds {
    /// The offsets of the `\n`s, in order.
    pub fn offsets(&self) -> &[u32] {
        &self.at
    }

    /// Whether some `\n` comes right after a `\r`.
    pub fn after_cr(&self) -> bool {
        self.after_cr
    }
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

    /// The start of line `n` if it is a checkpoint, or known from the line ends.
    fn exact(&self, n: u64) -> Option<u64> {
        if n >= 2
            && let Some(&end) = self.ends().and_then(|ends| ends.get(usize::try_from(n - 2).ok()?))
        {
            return Some(u64::from(end) + 1);
        }
        self.checkpoints.binary_search_by_key(&n, |c| c.line).ok().map(|i| self.checkpoints[i].offset)
    }

    /// The offsets of the file's `\n`s, when they are kept (see [`LineIndex::set_ends`]).
    pub fn ends(&self) -> Option<&[u32]> {
        self.ends.get().map(LineEnds::offsets)
    }

    /// The line ends with what they say about `\r`s, when they are kept.
    pub fn line_ends_kept(&self) -> Option<&LineEnds> {
        self.ends.get()
    }

    /// Memory the line ends hold (counted apart from [`LineIndex::heap_bytes`]: the cache adds
    /// them to an entry it already holds, and counts them then).
    pub fn ends_bytes(&self) -> usize {
        self.ends.get().map_or(0, |ends| std::mem::size_of_val(ends.offsets()))
    }

    /// Whether this index is worth line ends: a file of [`DENSE_MIN_BYTES`] to
    /// [`DENSE_MAX_BYTES`], of lines that are 8 bytes long on average or longer (the ends then
    /// take at most half its size), that has none yet.
    pub fn wants_ends(&self) -> bool {
        (DENSE_MIN_BYTES..=DENSE_MAX_BYTES).contains(&self.len)
            && self.total_lines.saturating_mul(8) <= self.len
            && self.ends().is_none()
    }

    /// The line ends of `bytes`, when `bytes` are this index's file (see
    /// [`LineIndex::read_line_ends`]).
    #[cfg(test)]
    pub fn line_ends(&self, bytes: &[u8]) -> Option<LineEnds> {
        if bytes.len() as u64 != self.len {
            return None;
        }
        self.read_line_ends(|buf, pos| {
            let from = bytes.get(usize::try_from(pos).unwrap_or(usize::MAX)..).unwrap_or_default();
            let n = buf.len().min(from.len());
            buf[..n].copy_from_slice(&from[..n]);
            Ok(n)
        })
    }

    /// The line ends of this index's file, read through `read_at` (a positional read: fills
    /// the buffer from the offset, returns how much it read) a chunk of [`ENDS_CHUNK`] bytes at
    /// a time, so the file is never held whole; `None` unless what was read is this index's
    /// file (its lines and every checkpoint agree, and it is as long; the caller also checks
    /// the file did not change, nor grow) and every offset fits in 32 bits. The ends are
    /// gathered in one buffer of exactly the index's line count.
    pub fn read_line_ends(
        &self,
        mut read_at: impl FnMut(&mut [u8], u64) -> std::io::Result<usize>,
    ) -> Option<LineEnds> {
        let lines = usize::try_from(self.total_lines).ok()?;
        let mut ends = Vec::with_capacity(lines);
        let mut chunk = vec![0u8; ENDS_CHUNK.min(usize::try_from(self.len).ok()?)];
        let mut pos = 0u64;
        // The byte before the chunk at hand (the last of the one before), and whether a `\n`
        // came right after a `\r`.
        let (mut before, mut after_cr) = (0u8, false);
        while pos < self.len {
            let want = usize::try_from(self.len - pos).map_or(chunk.len(), |left| left.min(chunk.len()));
            let n = read_at(&mut chunk[..want], pos).ok()?;
            if n == 0 {
                return None;
            }
            for at in memchr_iter(b'\n', &chunk[..n]) {
                if ends.len() == lines {
                    return None;
                }
                ends.push(u32::try_from(pos + at as u64).ok()?);
                after_cr |= at.checked_sub(1).map_or(before, |i| chunk[i]) == b'\r';
            }
            before = chunk[n - 1];
            pos += n as u64;
        }
        let first = if self.bom { BOM.len() as u64 } else { 0 };
        let last_line_open = self.len > first && ends.last().is_none_or(|&nl| u64::from(nl) + 1 != self.len);
        let agree = ends.len() as u64 + u64::from(last_line_open) == self.total_lines
            && self.checkpoints.iter().all(|c| {
                c.line < 2 || ends.get((c.line - 2) as usize).is_some_and(|&nl| u64::from(nl) + 1 == c.offset)
            });
        agree.then(|| LineEnds { at: ends.into_boxed_slice(), after_cr })
    }

    /// Keeps `ends` (from [`LineIndex::read_line_ends`]); `false` when the index already has them.
    pub fn set_ends(&self, ends: LineEnds) -> bool {
        self.ends.set(ends).is_ok()
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

    /// [`Checkpoints::see`] of the line start after each newline of `chunk` (at file offset
    /// `pos`), the first being newline number `*newlines + 1`; updates `newlines` and
    /// `last_newline`. The newlines of a span that can hold no checkpoint (fewer than the lines
    /// left to the next one, all in the last line start's block) are only counted, with one
    /// vectorised count, not visited one by one.
    fn see_newlines(&mut self, chunk: &[u8], pos: u64, newlines: &mut u64, last_newline: &mut Option<u64>) {
        let before = *newlines;
        let mut at = 0;
        while at < chunk.len() {
            let end = (at + COUNT_SPAN).min(chunk.len());
            let span = &chunk[at..end];
            // The line starts after this span's newlines are within pos + at + 1 ..= pos + end.
            let quiet = !self.list.is_empty()
                && (pos + at as u64 + 1) / CHECKPOINT_BLOCK == self.last_block
                && (pos + end as u64) / CHECKPOINT_BLOCK == self.last_block;
            if quiet {
                // `see` records a checkpoint once `since` reaches CHECKPOINT_LINES - 1.
                let free = CHECKPOINT_LINES - 1 - self.since;
                let count = memchr_iter(b'\n', span).count() as u64;
                if count <= free {
                    self.since += count;
                    *newlines += count;
                    at = end;
                    continue;
                }
            }
            for i in memchr_iter(b'\n', span) {
                *newlines += 1;
                self.see(*newlines + 1, pos + (at + i) as u64 + 1);
            }
            at = end;
        }
        if *newlines > before {
            *last_newline = memchr::memrchr(b'\n', chunk).map(|i| pos + i as u64);
        }
    }
}

/// Bytes of a span whose newlines [`Checkpoints::see_newlines`] counts at once.
const COUNT_SPAN: usize = 256;

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
            // The line after each newline is line `newlines + 1`; it is recorded even if it
            // turns out to be past the end (dropped in `finish`).
            self.checkpoints.see_newlines(chunk, self.pos, &mut self.newlines, &mut self.last_newline);
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
        return LineIndex { bom, len, total_lines: 0, checkpoints: Vec::new(), ends: OnceLock::new() };
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
    LineIndex { bom, len, total_lines, checkpoints, ends: OnceLock::new() }
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
            // Part-relative numbering; made global below.
            points.see_newlines(chunk, pos, &mut newlines, &mut last_newline);
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

/// A window's lines in one buffer: their text and where each starts and ends in it (one
/// allocation for the text and one for the bounds, not one per line). The text may hold more
/// than the lines — their terminators, the rest of a cut line, bytes before the first line —
/// when it is the very buffer the file's bytes were read into (no copy between the read and
/// the projection).
#[derive(Clone, Default)]
pub struct LineBuf {
    text: String,
    /// Where each line starts and ends in `text`.
    bounds: Vec<(usize, usize)>,
    /// The lines' bytes, added up.
    line_bytes: usize,
}

impl LineBuf {
    /// Adds a line.
    pub fn push(&mut self, line: &str) {
        let start = self.text.len();
        self.text.push_str(line);
        self.bounds.push((start, self.text.len()));
        self.line_bytes += line.len();
    }

    /// The text the lines are in, and where each starts and ends in it (the text may hold more
    /// than the lines: their terminators, bytes before the first; never more than the window's
    /// read). For a projection that goes through the lines in place.
    pub fn parts(&self) -> (&str, &[(usize, usize)]) {
        (&self.text, &self.bounds)
    }

    /// How many lines.
    pub fn len(&self) -> usize {
        self.bounds.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.bounds.is_empty()
    }

    /// The bytes of all the lines (terminators are not counted).
    pub fn text_len(&self) -> usize {
        self.line_bytes
    }

    /// Line `i` (0-based).
    pub fn get(&self, i: usize) -> Option<&str> {
        let &(start, end) = self.bounds.get(i)?;
        self.text.get(start..end)
    }

    /// The lines, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &str> + DoubleEndedIterator + '_ {
        self.bounds.iter().map(|&(start, end)| self.text.get(start..end).unwrap_or_default())
    }

    /// The lines as owned strings (for wire types that hold a list).
    pub fn to_vec(&self) -> Vec<String> {
        self.iter().map(str::to_owned).collect()
    }
}

/// Lines of the chunk at hand taken in place, not copied yet: file bytes `from..to` belong at
/// `at` in the text.
#[derive(Clone, Copy)]
struct Run {
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
struct RawLines {
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

impl std::fmt::Debug for LineBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl PartialEq for LineBuf {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for LineBuf {}

impl<S: AsRef<str>> PartialEq<[S]> for LineBuf {
    fn eq(&self, other: &[S]) -> bool {
        self.len() == other.len() && self.iter().zip(other).all(|(a, b)| a == b.as_ref())
    }
}

impl<S: AsRef<str>> PartialEq<Vec<S>> for LineBuf {
    fn eq(&self, other: &Vec<S>) -> bool {
        *self == other[..]
    }
}

impl<S: AsRef<str>, const N: usize> PartialEq<[S; N]> for LineBuf {
    fn eq(&self, other: &[S; N]) -> bool {
        *self == other[..]
    }
}

impl<S: AsRef<str>> FromIterator<S> for LineBuf {
    fn from_iter<I: IntoIterator<Item = S>>(lines: I) -> Self {
        let mut buf = LineBuf::default();
        for line in lines {
            buf.push(line.as_ref());
        }
        buf
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
fn decode_line(bytes: &[u8], cut_by_read: bool, max_chars: Option<u32>) -> Result<(&str, bool), NotText> {
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
fn cut_to_bytes(text: &str, bytes: u64) -> &str {
    let mut at = usize::try_from(bytes).unwrap_or(usize::MAX).min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    &text[..at]
}

/// The position of the first `\n` in `bytes`: the first 64 bytes (the usual line is shorter)
/// eight at a time inline, then `memchr`, whose set-up costs more than a short line.
#[inline]
fn newline(bytes: &[u8]) -> Option<usize> {
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

/// The length of line `n` (of `total`), which starts at `start` and of which `seen` bytes are
/// known not to hold its end: a jump to the next line's checkpoint when there is one, else a
/// scan for its newline (nothing is kept).
fn line_length<S: ByteSource + ?Sized>(
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
fn newline_bits(word: u64) -> u64 {
    const LOW: u64 = u64::from_ne_bytes([0x7F; 8]);
    let x = word ^ u64::from_ne_bytes([b'\n'; 8]);
    !((x & LOW).wrapping_add(LOW) | x | LOW)
}

/// The positions of the `\n`s in `bytes` from some offset on, in order: eight bytes at a time,
/// one step per newline found (no branch per byte, no call per line).
struct Newlines<'b> {
    bytes: &'b [u8],
    /// Where the next word starts.
    next: usize,
    /// Where the current word starts, and its newlines not yet given.
    base: usize,
    bits: u64,
}

impl<'b> Newlines<'b> {
    fn new(bytes: &'b [u8], from: usize) -> Self {
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
fn take_plain_lines<S: ByteSource + ?Sized>(
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
struct Progress {
    n: u64,
    pos: u64,
    used: u64,
}

/// The chunk [`take_plain_lines`] takes lines from, and what it takes them for.
struct Plain<'a> {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Whole lines, with no byte budget to speak of.
    fn req(offset: u64, limit: u64) -> WindowRequest {
        WindowRequest::whole(offset, limit, u64::MAX)
    }

    fn cut(text: &[u8], request: &WindowRequest) -> Window {
        let (_, index) = Scanner::scan(text);
        window(text, &index.unwrap(), request).unwrap()
    }

    fn lines(text: &[u8], offset: u64, limit: u64) -> Window {
        cut(text, &req(offset, limit))
    }

    /// `text`'s index with its line ends kept.
    fn with_ends(text: &[u8]) -> LineIndex {
        let index = Scanner::scan(text).1.unwrap();
        assert!(index.set_ends(index.line_ends(text).expect("the text's own ends")));
        index
    }

    /// A source that hands out at most `.1` bytes at a time (windows span chunks).
    struct Small<'a>(&'a [u8], usize);

    impl ByteSource for Small<'_> {
        fn chunk_at(&self, offset: u64, max: usize) -> std::io::Result<Cow<'_, [u8]>> {
            let start = usize::try_from(offset).unwrap().min(self.0.len());
            let end = start.saturating_add(max.min(self.1)).min(self.0.len());
            Ok(Cow::Owned(self.0[start..end].to_vec()))
        }
    }

    #[test]
    fn windows_cut_with_the_line_ends_kept_are_the_windows_searched() {
        // Lines of every kind: empty, CRLF, a lone CR, non-ASCII, one just at the character
        // cap (with its \r), longer ones, a last line with and without its newline, a BOM.
        let mut seed = 7u64;
        let mut next = move |below: u64| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) % below
        };
        for case in 0..40 {
            let mut text = if case % 3 == 0 { "\u{feff}".to_owned() } else { String::new() };
            for _ in 0..next(300) {
                match next(12) {
                    0 => {}
                    // Every fourth text without a `\r` before a newline (cut from the ends alone).
                    1 if case % 4 != 1 => text.push_str("crlf ü\r"),
                    2 => text.push_str("lone \r cr"),
                    3 => text.push_str(&"é".repeat(1 + next(30) as usize)),
                    4 => text.push_str(&"x".repeat(2000 + next(3) as usize)),
                    5 => text.push_str(&"y".repeat(1999 + next(3) as usize)),
                    _ => text.push_str(&"word \"q\" ".repeat(next(8) as usize)),
                }
                text.push('\n');
            }
            if case % 2 == 0 {
                text.push_str("last");
            }
            let bytes = text.as_bytes();
            let sparse = Scanner::scan(bytes).1.unwrap();
            let dense = with_ends(bytes);
            assert_eq!(dense.ends().map(<[u32]>::len), Some(memchr_iter(b'\n', bytes).count()));
            let total = sparse.total_lines;
            for _ in 0..20 {
                let offset = 1 + next(total + 2);
                let limit = 1 + next(total + 2);
                let budget = if next(2) == 0 { u64::MAX } else { next(20_000) };
                let cap = [None, Some(2000), Some(5)][next(3) as usize];
                let fit_first = next(2) == 0;
                let request = WindowRequest {
                    offset,
                    limit,
                    max_line_chars: cap,
                    max_bytes: budget,
                    overhead: |n, cut| 8 + n % 3 + if cut { 30 } else { 0 },
                    overhead_of_lines: None,
                    fit_first,
                };
                let at_once = WindowRequest {
                    overhead_of_lines: Some(|first, last| (first..=last).map(|n| 8 + n % 3).sum()),
                    ..request
                };
                let expected = window(bytes, &sparse, &request).unwrap();
                let chunk = 1 + next(5000) as usize;
                assert_eq!(window(bytes, &dense, &request).unwrap(), expected, "{case} {request:?}");
                assert_eq!(window(bytes, &dense, &at_once).unwrap(), expected, "{case} {request:?}");
                assert_eq!(
                    window(&Small(bytes, chunk), &dense, &at_once).unwrap(),
                    expected,
                    "{case} {chunk}"
                );
                assert_eq!(window(bytes, &sparse, &at_once).unwrap(), expected, "{case} {request:?}");
                assert_eq!(
                    window(&Small(bytes, chunk), &dense, &request).unwrap(),
                    expected,
                    "{case} {chunk}"
                );
                assert_eq!(
                    window(&Small(bytes, chunk), &sparse, &request).unwrap(),
                    expected,
                    "{case} {chunk}"
                );
            }
        }
    }

    #[test]
    fn line_ends_read_in_pieces_are_the_ends_of_the_whole() {
        // Lines of 0-199 bytes over two and a half chunks, read back 1 to 7,000 bytes at a time.
        let mut text = Vec::new();
        for n in 0..2_000u32 {
            text.extend(std::iter::repeat_n(b'x', (n * 37 % 200) as usize));
            text.push(b'\n');
        }
        text.extend_from_slice(b"open last line");
        assert!(text.len() > 2 * ENDS_CHUNK);
        let index = Scanner::scan(&text).1.unwrap();
        let whole: Vec<u32> =
            text.iter().enumerate().filter(|(_, b)| **b == b'\n').map(|(at, _)| at as u32).collect();
        for piece in [1usize, 7, 4096, 7_000] {
            let ends = index.read_line_ends(|buf, pos| {
                let from = &text[pos as usize..];
                let n = buf.len().min(from.len()).min(piece);
                buf[..n].copy_from_slice(&from[..n]);
                Ok(n)
            });
            let ends = ends.expect("the text's own ends");
            assert_eq!(ends.offsets(), &whole[..], "read {piece} bytes at a time");
            assert!(!ends.after_cr());
        }
        // A file that ends early, or fails to read, has no line ends.
        assert_eq!(index.read_line_ends(|_, pos| Ok(if pos < 1000 { 10 } else { 0 })), None);
        assert_eq!(index.read_line_ends(|_, _| Err(std::io::Error::other("gone"))), None);
    }

    #[test]
    fn line_ends_say_whether_a_newline_follows_a_carriage_return() {
        // A `\r` that is the last byte of one read and a `\n` the first of the next.
        let mut across = vec![b'x'; ENDS_CHUNK - 1];
        across.extend_from_slice(b"\r\ntail\n");
        let cases: [(&[u8], bool); 6] = [
            (b"a\nb\rc\nd", false),
            (b"\na\r", false),
            (b"\r\rx\n\r", false),
            (b"a\nb\r\nc", true),
            (b"\r\n", true),
            (&across, true),
        ];
        for (text, after_cr) in cases {
            let index = Scanner::scan(text).1.unwrap();
            for piece in [1usize, 2, 3, ENDS_CHUNK] {
                let ends = index
                    .read_line_ends(|buf, pos| {
                        let from = &text[pos as usize..];
                        let n = buf.len().min(from.len()).min(piece);
                        buf[..n].copy_from_slice(&from[..n]);
                        Ok(n)
                    })
                    .expect("the text's own ends");
                assert_eq!(
                    ends.after_cr(),
                    after_cr,
                    "{piece} {:?}",
                    String::from_utf8_lossy(&text[..text.len().min(20)])
                );
            }
        }
    }

    #[test]
    fn line_ends_are_kept_only_for_the_bytes_of_their_index() {
        let text = b"one\ntwo\r\nthree";
        let index = Scanner::scan(text).1.unwrap();
        assert_eq!(index.checkpoints.len(), 2);
        assert_eq!(index.line_ends(text).map(|ends| ends.offsets().to_vec()), Some(vec![3u32, 8]));
        assert_eq!(index.line_ends(b"one\ntwo\r\nth\nee"), None, "a line more");
        assert_eq!(index.line_ends(b"on\netwo\r\nthree"), None, "a checkpoint elsewhere");
        assert_eq!(index.line_ends(b"one\ntwo\r\nthreee"), None, "another length");
        assert_eq!(index.ends_bytes(), 0);
        assert!(index.set_ends(index.line_ends(text).unwrap()));
        assert!(!index.set_ends(LineEnds { at: Box::new([]), after_cr: false }), "set once");
        assert_eq!(index.ends_bytes(), 8);
        // Windows of a file that changed under its index stop where its bytes disagree.
        let w = window(&b"one\ntwo\r\nthree"[..], &index, &req(1, 3)).unwrap();
        assert_eq!(w.lines, ["one", "two", "three"]);
        let moved = window(&b"on\nxtwo\r\nthree"[..], &index, &req(1, 3));
        assert!(moved.is_err() || moved.unwrap().lines != ["one", "two", "three"]);
        // Files of 64 to 512 KiB of lines 8 bytes long on average, or longer, want them.
        let long = "a line of text\n".repeat(DENSE_MIN_BYTES as usize / 15 + 1);
        assert!(Scanner::scan(long.as_bytes()).1.unwrap().wants_ends());
        let small = "a line of text\n".repeat(DENSE_MIN_BYTES as usize / 15 - 1);
        assert!(!Scanner::scan(small.as_bytes()).1.unwrap().wants_ends());
        let short = "a\n".repeat(DENSE_MIN_BYTES as usize);
        assert!(!Scanner::scan(short.as_bytes()).1.unwrap().wants_ends());
        let big = "a line of text\n".repeat(DENSE_MAX_BYTES as usize / 15 + 1);
        assert!(!Scanner::scan(big.as_bytes()).1.unwrap().wants_ends());
    }

    #[test]
    fn the_word_newline_search_finds_what_memchr_finds() {
        let mut bytes = Vec::new();
        for i in 0..300u32 {
            bytes.push(match i * 7919 % 13 {
                0 | 5 => b'\n',
                1 => 0x8a,
                2 => 0x0b,
                3 => 0xff,
                4 => 0x00,
                _ => b'a' + (i % 26) as u8,
            });
        }
        for len in [0, 1, 7, 8, 9, 63, 64, 65, 300] {
            let bytes = &bytes[..len];
            for from in 0..=len.min(20) {
                let found: Vec<usize> = Newlines::new(bytes, from).collect();
                let expected: Vec<usize> =
                    memchr::memchr_iter(b'\n', &bytes[from..]).map(|i| from + i).collect();
                assert_eq!(found, expected, "{len} from {from}");
            }
        }
        assert_eq!(Newlines::new(&[b'\n'; 17], 0).count(), 17);
    }

    #[test]
    fn a_window_read_from_a_chunk_that_starts_inside_a_character_is_the_same() {
        use std::io::Write as _;
        // Line 3, after a checkpoint, crosses the first read's end: finding line 5 reads on
        // from inside line 3 (inside a character, for one of the two prefixes), and that read
        // holds the window's lines.
        for prefix in ["x", "xy"] {
            let mut text = String::from("line 1\nline 2\n");
            text.push_str(prefix);
            text.push_str(&"é".repeat(3000));
            text.push('\n');
            for i in 4..=40 {
                text.push_str(&format!("line {i} ü\r\n"));
            }
            let (_, index) = Scanner::scan(text.as_bytes());
            let index = index.unwrap();
            let mut temp = tempfile::NamedTempFile::new().unwrap();
            temp.write_all(text.as_bytes()).unwrap();
            let file = std::fs::File::open(temp.path()).unwrap();
            for (offset, limit) in [(5, 5), (4, 37), (1, 3), (40, 1)] {
                let request = WindowRequest::whole(offset, limit, u64::MAX).cut_at(Some(2000));
                let read = window(&file, &index, &request).unwrap();
                let held = window(text.as_bytes(), &index, &request).unwrap();
                assert_eq!(read, held, "{offset} {limit}");
                assert_eq!(read.lines.len() as u64, limit);
            }
            let w = window(&file, &index, &WindowRequest::whole(5, 2, u64::MAX)).unwrap();
            assert_eq!(w.lines, ["line 5 ü", "line 6 ü"]);
            assert_eq!(w.lines.text_len(), 2 * "line 5 ü".len());
        }
    }

    #[test]
    fn the_inline_newline_search_finds_what_memchr_finds() {
        for len in 0..90 {
            for at in 0..=len {
                for other in [0u8, 0x0b, 0x8a, 0x09, 0xff, b'x'] {
                    let mut bytes = vec![other; len];
                    if at < len {
                        bytes[at] = b'\n';
                        if at + 3 < len {
                            bytes[at + 3] = b'\n';
                        }
                    }
                    assert_eq!(newline(&bytes), memchr::memchr(b'\n', &bytes), "{other:#x} {at} {len}");
                }
            }
        }
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
        assert_eq!((w.start_line, w.lines.to_vec()), (2, vec!["b".to_owned()]));
        assert!(lines(b"a\n", 2, 5).lines.is_empty());
    }

    #[test]
    fn long_lines_are_whole_unless_a_character_cap_is_asked() {
        let long = "é".repeat(2500);
        let text = format!("short\n{long}\n{}\r\n", "x".repeat(2000));
        let w = lines(text.as_bytes(), 1, 3);
        assert_eq!(w.lines.get(1).unwrap(), long, "whole");
        assert!(w.truncated.is_empty() && !w.capped && w.oversized.is_none());
        let w = cut(text.as_bytes(), &req(1, 3).cut_at(Some(2000)));
        assert_eq!(w.lines.get(1).unwrap().chars().count(), 2000);
        assert_eq!(w.lines.get(2).unwrap().len(), 2000, "exactly the cap plus \\r is not cut");
        assert_eq!(w.truncated, vec![2]);
    }

    #[test]
    fn a_window_of_whole_lines_stops_before_its_byte_budget() {
        let text = "aaaa\nbbbb\r\ncccc\ndd\n";
        // 4 + 4 bytes fit in 9, the third line does not.
        let w = cut(text.as_bytes(), &WindowRequest::whole(1, 10, 9));
        assert_eq!((w.lines.to_vec(), w.capped), (vec!["aaaa".to_owned(), "bbbb".to_owned()], true));
        // Exactly full: the \r does not count, and reaching the last asked line is not capped.
        let w = cut(text.as_bytes(), &WindowRequest::whole(2, 2, 8));
        assert_eq!((w.lines.to_vec(), w.capped), (vec!["bbbb".to_owned(), "cccc".to_owned()], false));
        // A first line over the budget: no lines, its size reported.
        let w = cut(text.as_bytes(), &WindowRequest::whole(2, 2, 3));
        assert!(w.lines.is_empty());
        assert_eq!(w.oversized, Some(Oversized { line: 2, bytes: 5 }));
        // Unless asked to cut it to fit, counting what the caller adds per line.
        let request = WindowRequest {
            fit_first: true,
            overhead: |_, cut| if cut { 2 } else { 1 },
            overhead_of_lines: Some(|first, last| last + 1 - first),
            ..WindowRequest::whole(3, 5, 4)
        };
        let w = cut(text.as_bytes(), &request);
        assert_eq!((w.lines.to_vec(), w.truncated.clone(), w.capped), (vec!["cc".to_owned()], vec![3], true));
        // Whole lines and overhead: "dd" costs 3 with its overhead of 1.
        let request = WindowRequest {
            overhead: |_, _| 1,
            overhead_of_lines: Some(|first, last| last + 1 - first),
            ..WindowRequest::whole(3, 5, 8)
        };
        let w = cut(text.as_bytes(), &request);
        assert_eq!((w.lines.to_vec(), w.capped), (vec!["cccc".to_owned(), "dd".to_owned()], false));
        // Cut to fit at a character boundary.
        let w = cut("ééé\n".as_bytes(), &WindowRequest { fit_first: true, ..WindowRequest::whole(1, 1, 5) });
        assert_eq!((w.lines.to_vec(), w.capped), (vec!["éé".to_owned()], false));
    }

    /// A source that counts the bytes it hands out.
    struct Counting<'a>(&'a [u8], std::sync::atomic::AtomicU64);

    impl ByteSource for Counting<'_> {
        fn chunk_at(&self, offset: u64, max: usize) -> std::io::Result<Cow<'_, [u8]>> {
            let start = usize::try_from(offset).unwrap().min(self.0.len());
            let end = start.saturating_add(max).min(self.0.len());
            self.1.fetch_add((end - start) as u64, std::sync::atomic::Ordering::Relaxed);
            Ok(Cow::Borrowed(&self.0[start..end]))
        }
    }

    #[test]
    fn a_huge_line_is_never_read_whole_to_be_cut_or_refused() {
        let huge = "y".repeat(4 << 20);
        let index = Scanner::scan(huge.as_bytes()).1.unwrap();
        let source = Counting(huge.as_bytes(), Default::default());
        let read = || source.1.swap(0, std::sync::atomic::Ordering::Relaxed);
        let w = window(&source, &index, &req(1, 2000).cut_at(Some(2000))).unwrap();
        assert_eq!((w.lines.get(0).unwrap().len(), w.truncated.clone()), (2000, vec![1]));
        let bytes = read();
        assert!(bytes <= READ_AHEAD as u64, "one read for the prefix, not the line: {bytes}");
        let w = window(&source, &index, &WindowRequest::whole(1, 2000, 1 << 20)).unwrap();
        assert_eq!(w.oversized, Some(Oversized { line: 1, bytes: 4 << 20 }));
        // Its length is learnt by reading on, but nothing past the budget is kept.
        assert!(w.lines.is_empty());
        read();
        let two = format!("{huge}\nz\n");
        let index = Scanner::scan(two.as_bytes()).1.unwrap();
        let source = Counting(two.as_bytes(), Default::default());
        let w = window(&source, &index, &req(1, 2).cut_at(Some(10))).unwrap();
        assert_eq!(w.lines, ["y".repeat(10), "z".to_owned()]);
        let bytes = source.1.load(std::sync::atomic::Ordering::Relaxed);
        assert!(bytes <= READ_AHEAD as u64 + 2, "the next line's checkpoint is jumped to: {bytes}");
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
                    window(data.as_slice(), index, &req(n, 1)).unwrap().lines,
                    *std::slice::from_ref(&expected),
                    "line {n}"
                );
            }
        }
        let mut bad = data.clone();
        bad[20_000_000] = 0xff;
        assert_eq!(scan_parallel(&bad).1.err(), Scanner::scan(&bad).1.err());
    }

    #[test]
    fn counted_newlines_make_the_checkpoints_of_visited_ones() {
        // Line lengths from 0 to ~700 bytes (runs of short lines, long lines, empty ones) over
        // more than two checkpoint blocks, fed whole and in odd chunks.
        let mut data = Vec::new();
        let mut x = 12_345u64;
        while data.len() < 2 * CHECKPOINT_BLOCK as usize + 300_000 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            let len = match (x >> 60) % 4 {
                0 => 0,
                1 => (x >> 20) as usize % 8,
                2 => (x >> 20) as usize % 80,
                _ => (x >> 20) as usize % 700,
            };
            data.extend(std::iter::repeat_n(b'a', len));
            data.push(b'\n');
        }
        data.extend_from_slice(b"tail");
        // Every newline visited, as before counting.
        let mut visited = Checkpoints::new();
        let mut newlines = 0u64;
        for i in memchr_iter(b'\n', &data) {
            newlines += 1;
            visited.see(newlines + 1, i as u64 + 1);
        }
        for chunk in [data.len(), 777, 256, 255, 4096, 100_003] {
            let mut counted = Checkpoints::new();
            let (mut n, mut last) = (0u64, None);
            for (k, piece) in data.chunks(chunk).enumerate() {
                counted.see_newlines(piece, (k * chunk) as u64, &mut n, &mut last);
            }
            assert_eq!(n, newlines, "chunk {chunk}");
            assert_eq!(last, memchr::memrchr(b'\n', &data).map(|i| i as u64), "chunk {chunk}");
            assert_eq!(counted.list, visited.list, "chunk {chunk}");
            assert_eq!((counted.since, counted.last_block), (visited.since, visited.last_block));
        }
    }

    #[test]
    fn index_stays_small_and_huge_lines_are_jumped() {
        let huge = "x".repeat(3 * 1024 * 1024);
        let text = format!("a\n{huge}\nb\nc");
        let (_, index) = Scanner::scan(text.as_bytes());
        let index = index.unwrap();
        assert!(index.checkpoints.len() <= 4, "{:?}", index.checkpoints);
        let w = window(text.as_bytes(), &index, &req(2, 3).cut_at(Some(2000))).unwrap();
        assert_eq!(w.lines.get(0).unwrap().len(), 2000);
        assert_eq!(&w.lines.to_vec()[1..], ["b", "c"]);
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
