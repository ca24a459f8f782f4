//! The line index itself: the checkpoints of a file's line starts (sparse, at least every
//! [`CHECKPOINT_LINES`] lines and every [`CHECKPOINT_BLOCK`] bytes), its dense line ends when
//! it is small, and why a file is not text.

use std::sync::OnceLock;

use memchr::memchr_iter;

pub(super) const BOM: &[u8] = b"\xEF\xBB\xBF";

/// At most this many lines lie between two checkpoints.
pub const CHECKPOINT_LINES: u64 = 64;
/// Every block of this many bytes that holds a line start holds a checkpoint.
pub const CHECKPOINT_BLOCK: u64 = 1024 * 1024;

/// The longest prefix of a line, in bytes, that can hold `chars` characters plus one more (to
/// know whether the line was cut) and a trailing `\r`: what a window keeps of a line it cuts.
pub(super) fn prefix_bytes(chars: u32) -> usize {
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
    pub(super) fn offset(self) -> u64 {
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
pub(super) const ENDS_CHUNK: usize = 64 * 1024;

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
    pub(super) checkpoints: Vec<Checkpoint>,
    /// Where every `\n` of the file is, in order (so line `n` ends at `ends[n - 1]` and the
    /// next starts after it): set at most once, for a small file read warm (the cache adds it
    /// to an entry it holds, and counts its bytes: see [`LineIndex::ends_bytes`]). A window
    /// of such a file is cut without searching for its lines' ends.
    pub(super) ends: OnceLock<LineEnds>,
}

/// Where every `\n` of a file is (see [`LineIndex::ends`]), and whether any of them comes
/// right after a `\r` (when none does, a line's bounds are its ends alone: nothing of the file
/// is looked at to cut a window of whole lines).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineEnds {
    pub(super) at: Box<[u32]>,
    pub(super) after_cr: bool,
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
    pub(super) fn checkpoint_for(&self, n: u64) -> Checkpoint {
        let at = self.checkpoints.partition_point(|c| c.line <= n);
        self.checkpoints[at.saturating_sub(1)]
    }

    /// The start of line `n` if it is a checkpoint, or known from the line ends.
    pub(super) fn exact(&self, n: u64) -> Option<u64> {
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
pub(super) struct Checkpoints {
    pub(super) list: Vec<Checkpoint>,
    /// Line starts seen since the last checkpoint.
    pub(super) since: u64,
    /// Block of the last line start seen.
    pub(super) last_block: u64,
}

impl Checkpoints {
    pub(super) fn new() -> Self {
        Self { list: Vec::new(), since: 0, last_block: u64::MAX }
    }

    /// Records line start `offset`, the `line`-th line start of this sequence (1-based within
    /// the sequence; the first one is always a checkpoint).
    pub(super) fn see(&mut self, line: u64, offset: u64) {
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
    pub(super) fn see_newlines(
        &mut self,
        chunk: &[u8],
        pos: u64,
        newlines: &mut u64,
        last_newline: &mut Option<u64>,
    ) {
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
pub(super) const COUNT_SPAN: usize = 256;
