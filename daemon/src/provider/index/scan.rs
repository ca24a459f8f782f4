//! The one pass over a file's bytes that computes its version, checks it is text (UTF-8, no
//! NUL) and builds its line index, on one thread or several.

use std::sync::OnceLock;

use super::lines::{BOM, Checkpoint, Checkpoints, LineIndex, NotText};
use crate::provider::version::Version;

/// Incremental UTF-8 and NUL checking over chunks (a character may straddle two chunks).
#[derive(Debug, Default)]
pub(super) struct TextCheck {
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
pub(super) fn assemble(
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
