//! Text scanning and line windows: one pass over a file's bytes computes its version, checks it
//! is text (UTF-8, no NUL) and builds its line index; a window is then cut from any byte source
//! at the cost of the window, not the file.

use memchr::memchr_iter;

use super::version::Version;
use filectx_protocol::tools::READ_LINE_MAX_CHARS;

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The longest prefix of a line, in bytes, that can hold `READ_LINE_MAX_CHARS` characters plus
/// one more (to know whether the line was cut) and a trailing `\r`.
const LINE_PREFIX_BYTES: u64 = (READ_LINE_MAX_CHARS as u64 + 1) * 4 + 1;

/// Why a file is not text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotText {
    /// It contains a NUL byte at this offset (binary).
    Nul(u64),
    /// It is not valid UTF-8 at this byte offset.
    InvalidUtf8(u64),
}

impl std::fmt::Display for NotText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Nul(at) => write!(f, "it contains a NUL byte at offset {at} (a binary file)"),
            Self::InvalidUtf8(at) => write!(f, "it is not valid UTF-8 (at byte {at})"),
        }
    }
}

/// A text file's line structure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineIndex {
    /// Whether the file starts with a UTF-8 byte-order mark (not shown, kept on write).
    pub bom: bool,
    /// Byte offset where each line starts; line `n` (1-based) starts at `starts[n - 1]`.
    starts: Vec<u64>,
    /// File length in bytes.
    len: u64,
    /// Whether the last byte is `\n` (the last line then ends before it).
    final_newline: bool,
}

impl LineIndex {
    /// Number of lines: `"a\nb\n"` and `"a\nb"` have 2, `""` has 0.
    pub fn total_lines(&self) -> u64 {
        self.starts.len() as u64
    }

    /// Memory the index holds, for cache accounting.
    pub fn heap_bytes(&self) -> usize {
        self.starts.capacity() * std::mem::size_of::<u64>()
    }

    /// Byte range of line `n` (1-based), without its `\n` (a `\r` before it is still included).
    fn line_range(&self, n: u64) -> (u64, u64) {
        let i = (n - 1) as usize;
        let start = self.starts[i];
        let end = match self.starts.get(i + 1) {
            Some(&next) => next - 1,
            None if self.final_newline => self.len - 1,
            None => self.len,
        };
        (start, end)
    }

    /// Byte range covered by lines `first..=last`.
    pub fn span(&self, first: u64, last: u64) -> (u64, u64) {
        (self.line_range(first).0, self.line_range(last).1)
    }
}

/// Feeds a file's bytes through in chunks; yields its version and, if it is text, its index.
#[derive(Debug)]
pub struct Scanner {
    hasher: blake3::Hasher,
    pos: u64,
    newlines: Vec<u64>,
    /// The bytes of a UTF-8 sequence split across chunks.
    carry: Vec<u8>,
    not_text: Option<NotText>,
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
            newlines: Vec::new(),
            carry: Vec::with_capacity(4),
            not_text: None,
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
        if self.not_text.is_none() {
            if let Some(at) = memchr::memchr(0, chunk) {
                self.not_text = Some(NotText::Nul(self.pos + at as u64));
            } else {
                self.check_utf8(chunk);
            }
            let base = self.pos;
            self.newlines.extend(memchr_iter(b'\n', chunk).map(|i| base + i as u64));
        }
        self.pos += chunk.len() as u64;
    }

    fn check_utf8(&mut self, chunk: &[u8]) {
        let mut data = chunk;
        let mut offset = self.pos;
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
                    // Still incomplete: the chunk was tiny.
                    self.carry = joined;
                    return;
                }
                Err(_) => {
                    self.not_text = Some(NotText::InvalidUtf8(self.pos - carried as u64));
                    return;
                }
            }
        }
        if let Err(e) = std::str::from_utf8(data) {
            match e.error_len() {
                None => self.carry = data[e.valid_up_to()..].to_vec(),
                Some(_) => self.not_text = Some(NotText::InvalidUtf8(offset + e.valid_up_to() as u64)),
            }
        }
    }

    /// The version, and the line index or why the bytes are not text.
    pub fn finish(mut self) -> (Version, Result<LineIndex, NotText>) {
        let version = Version::from_hash(self.hasher.finalize());
        if self.not_text.is_none() && !self.carry.is_empty() {
            self.not_text = Some(NotText::InvalidUtf8(self.pos - self.carry.len() as u64));
        }
        if let Some(why) = self.not_text {
            return (version, Err(why));
        }
        let bom = self.head.as_slice() == BOM;
        let first = if bom { BOM.len() as u64 } else { 0 };
        let len = self.pos;
        let mut starts = Vec::with_capacity(self.newlines.len() + 1);
        if len > first {
            starts.push(first);
            starts.extend(self.newlines.iter().map(|&nl| nl + 1).filter(|&s| s < len));
        }
        let final_newline = self.newlines.last().is_some_and(|&nl| nl + 1 == len);
        (version, Ok(LineIndex { bom, starts, len, final_newline }))
    }

    /// Scans a whole buffer.
    pub fn scan(bytes: &[u8]) -> (Version, Result<LineIndex, NotText>) {
        let mut scanner = Self::new();
        scanner.feed(bytes);
        scanner.finish()
    }
}

/// Where window bytes come from: a buffer in memory or positional reads of an open file.
pub trait ByteSource {
    /// Reads exactly `len` bytes at `offset`.
    fn read_at(&self, offset: u64, len: u64) -> std::io::Result<Vec<u8>>;
}

impl ByteSource for [u8] {
    fn read_at(&self, offset: u64, len: u64) -> std::io::Result<Vec<u8>> {
        let start = usize::try_from(offset).map_err(std::io::Error::other)?;
        let end = usize::try_from(offset + len).map_err(std::io::Error::other)?;
        self.get(start..end).map(<[u8]>::to_vec).ok_or_else(|| std::io::ErrorKind::UnexpectedEof.into())
    }
}

impl ByteSource for std::fs::File {
    fn read_at(&self, offset: u64, len: u64) -> std::io::Result<Vec<u8>> {
        use std::os::unix::fs::FileExt;
        let mut buf = vec![0u8; usize::try_from(len).map_err(std::io::Error::other)?];
        self.read_exact_at(&mut buf, offset)?;
        Ok(buf)
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

/// Windows larger than this are read line by line (each line capped) instead of in one read.
const CONTIGUOUS_READ_BYTES: u64 = 8 * 1024 * 1024;

/// Decodes one line's bytes: drop a trailing `\r`, cut at the character cap.
fn decode_line(bytes: &[u8], full_len: u64) -> Result<(String, bool), NotText> {
    let cut_by_read = full_len > bytes.len() as u64;
    let mut bytes = bytes;
    if !cut_by_read && bytes.last() == Some(&b'\r') {
        bytes = &bytes[..bytes.len() - 1];
    }
    // A prefix read may end inside a character: keep only complete ones.
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) if cut_by_read && e.error_len().is_none() => {
            std::str::from_utf8(&bytes[..e.valid_up_to()]).map_err(|_| NotText::InvalidUtf8(0))?
        }
        Err(e) => return Err(NotText::InvalidUtf8(e.valid_up_to() as u64)),
    };
    let cap = READ_LINE_MAX_CHARS as usize;
    match text.char_indices().nth(cap) {
        Some((at, _)) => Ok((text[..at].to_owned(), true)),
        None => Ok((text.to_owned(), cut_by_read)),
    }
}

/// Cuts lines `offset..offset + limit` out of `source` using `index`. `offset` must be within
/// `1..=total_lines` (or 1 for an empty file).
pub fn window<S: ByteSource + ?Sized>(
    source: &S,
    index: &LineIndex,
    offset: u64,
    limit: u64,
) -> std::io::Result<Window> {
    let total = index.total_lines();
    let mut out = Window { start_line: offset, lines: Vec::new(), truncated: Vec::new(), total_lines: total };
    if total == 0 || offset > total || limit == 0 {
        return Ok(out);
    }
    let last = (offset + limit - 1).min(total);
    let (from, to) = index.span(offset, last);
    let invalid = |_| std::io::Error::new(std::io::ErrorKind::InvalidData, "window is not UTF-8");
    if to - from <= CONTIGUOUS_READ_BYTES {
        let bytes = source.read_at(from, to - from)?;
        for n in offset..=last {
            let (start, end) = index.line_range(n);
            let slice = &bytes[(start - from) as usize..(end - from) as usize];
            let (line, cut) = decode_line(slice, end - start).map_err(invalid)?;
            if cut {
                out.truncated.push(n);
            }
            out.lines.push(line);
        }
    } else {
        for n in offset..=last {
            let (start, end) = index.line_range(n);
            let len = (end - start).min(LINE_PREFIX_BYTES);
            let bytes = source.read_at(start, len)?;
            let (line, cut) = decode_line(&bytes, end - start).map_err(invalid)?;
            if cut {
                out.truncated.push(n);
            }
            out.lines.push(line);
        }
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
    fn version_does_not_depend_on_chunking() {
        let data: Vec<u8> = (0..10_000u32).flat_map(|i| format!("line {i}\n").into_bytes()).collect();
        let whole = Scanner::scan(&data);
        let mut s = Scanner::new();
        for c in data.chunks(777) {
            s.feed(c);
        }
        assert_eq!(s.finish(), whole);
        assert_eq!(whole.0, Version::of(&data));
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
