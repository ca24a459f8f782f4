//! The pure text transformation of an edit: literal matching that respects the file's line
//! endings, the match-count rules, and hints for near misses; the edited regions an edit's
//! result shows; a write's conventions (BOM, CRLF) and where content stops being text. No IO.

use std::borrow::Cow;

/// The UTF-8 byte-order mark.
pub const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Context lines shown around each edited place.
const REGION_CONTEXT: u64 = 2;
/// Edited places (regions, after merging neighbours) an edit's outcome describes.
const MAX_REGIONS: usize = 3;
/// Lines of one region kept (context included); the rest is left to a read.
const REGION_MAX_LINES: usize = 24;
/// Characters of one region line kept.
pub const REGION_LINE_MAX_CHARS: usize = 200;
/// Replacements whose places are considered for regions (the first ones).
const MAX_SPANS: usize = 64;

/// Why an edit found nothing to replace, or too much.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Miss {
    /// `old` does not occur; the hint says what nearly matched, if anything.
    NoMatch {
        /// A suggestion for the caller, e.g. that whitespace differs.
        hint: Option<String>,
    },
    /// `old` occurs this many times and `replace_all` was not set.
    Ambiguous(u64),
}

/// An edit's request, valid by construction: `old` is not empty and differs from `new`. Checked
/// once, where the input enters (the tool's arguments, `file/edit`, `fs/editText`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replacement<'a> {
    old: &'a str,
    new: &'a str,
    all: bool,
}

/// Why an edit's request is not one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum InvalidEdit {
    /// `old` is empty: there is nothing to find.
    #[error("old_string must not be empty")]
    Empty,
    /// `old` equals `new`: there is nothing to change.
    #[error("old_string and new_string are identical; nothing to change")]
    Identical,
    /// `new` holds a NUL byte: files are text.
    #[error("new_string has a NUL byte at {0}; only text can be written")]
    Nul(NulAt),
}

/// Where text holds a NUL byte: 1-based line and column (in characters), and the byte offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NulAt {
    /// 1-based line.
    pub line: u64,
    /// 1-based column, in characters.
    pub column: u64,
    /// 0-based byte offset.
    pub offset: u64,
}

impl std::fmt::Display for NulAt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}, column {} (byte offset {})", self.line, self.column, self.offset)
    }
}

/// Where `text` first holds a NUL byte, if it does.
pub fn nul_at(text: &str) -> Option<NulAt> {
    let offset = memchr::memchr(0, text.as_bytes())?;
    let before = &text[..offset];
    let line_start = memchr::memrchr(b'\n', before.as_bytes()).map_or(0, |at| at + 1);
    Some(NulAt {
        line: memchr::memchr_iter(b'\n', before.as_bytes()).count() as u64 + 1,
        column: before[line_start..].chars().count() as u64 + 1,
        offset: offset as u64,
    })
}

impl<'a> Replacement<'a> {
    /// Replace `old` by `new` (every occurrence when `all`, else exactly one).
    pub fn new(old: &'a str, new: &'a str, all: bool) -> Result<Self, InvalidEdit> {
        if old.is_empty() {
            return Err(InvalidEdit::Empty);
        }
        if old == new {
            return Err(InvalidEdit::Identical);
        }
        if let Some(at) = nul_at(new) {
            return Err(InvalidEdit::Nul(at));
        }
        Ok(Self { old, new, all })
    }

    /// The text to find.
    pub fn old(&self) -> &'a str {
        self.old
    }

    /// The text to put in its place.
    pub fn new_text(&self) -> &'a str {
        self.new
    }

    /// Whether every occurrence is replaced.
    pub fn all(&self) -> bool {
        self.all
    }
}

/// Whether the text uses CRLF line endings throughout (at least one, and no bare `\n`).
fn is_crlf(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut seen = false;
    for at in memchr::memchr_iter(b'\n', bytes) {
        if at == 0 || bytes[at - 1] != b'\r' {
            return false;
        }
        seen = true;
    }
    seen
}

/// `\n` and `\r\n` both become `\r\n`.
fn to_crlf(text: &str) -> String {
    text.replace("\r\n", "\n").replace('\n', "\r\n")
}

/// `content` as written over a file with a BOM (`bom`) and CRLF endings (`crlf`): the BOM
/// put in front unless the content has one already, each bare `\n` written as `\r\n`.
pub fn with_conventions(content: &str, bom: bool, crlf: bool) -> Cow<'_, [u8]> {
    let bytes = content.as_bytes();
    let add_bom = bom && !bytes.starts_with(BOM);
    let bare = |at: usize| at == 0 || bytes[at - 1] != b'\r';
    let bare_count = if crlf { memchr::memchr_iter(b'\n', bytes).filter(|&at| bare(at)).count() } else { 0 };
    if !add_bom && bare_count == 0 {
        return Cow::Borrowed(bytes);
    }
    let mut out = Vec::with_capacity(bytes.len() + bare_count + if add_bom { BOM.len() } else { 0 });
    if add_bom {
        out.extend_from_slice(BOM);
    }
    let mut from = 0;
    if crlf {
        for at in memchr::memchr_iter(b'\n', bytes).filter(|&at| bare(at)) {
            out.extend_from_slice(&bytes[from..at]);
            out.extend_from_slice(b"\r\n");
            from = at + 1;
        }
    }
    out.extend_from_slice(&bytes[from..]);
    Cow::Owned(out)
}

/// Collapses every run of whitespace to one space, for near-miss detection.
fn squash(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Removes line-number prefixes (digits and a tab, maybe spaces before: older reads padded the
/// number) that models copy from read output.
fn strip_line_numbers(text: &str) -> Option<String> {
    let mut stripped = Vec::new();
    for line in text.split('\n') {
        let rest = line.trim_start_matches(' ');
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits == 0 || !rest[digits..].starts_with('\t') {
            return None;
        }
        stripped.push(&rest[digits + 1..]);
    }
    Some(stripped.join("\n"))
}

fn hint(content: &str, old: &str) -> Option<String> {
    if let Some(stripped) = strip_line_numbers(old)
        && !stripped.is_empty()
        && content.contains(&stripped)
    {
        return Some(
            "old_string includes the line-number prefixes that read shows; leave them out and \
             copy only the text after the tab"
                .to_owned(),
        );
    }
    let squashed = squash(old);
    if !squashed.is_empty() && squash(content).contains(&squashed) {
        return Some(
            "the text exists with different whitespace: check indentation, tabs versus spaces and \
             line breaks, and copy old_string exactly from a fresh read"
                .to_owned(),
        );
    }
    None
}

/// An applied edit: the new text, how many replacements, and where the first ones are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The new text (no BOM).
    pub text: String,
    /// Occurrences replaced.
    pub replacements: u64,
    /// Byte ranges in `text` of the first replacements' new text (at most a few dozen).
    pub spans: Vec<std::ops::Range<usize>>,
}

/// `old` and `new` as they are matched and written in `content`: in a CRLF file (see
/// [`is_crlf`]) `\n` stands for `\r\n`, so the file keeps its endings.
fn as_in<'t>(content: &str, edit: &Replacement<'t>) -> (Cow<'t, str>, Cow<'t, str>) {
    if is_crlf(content) {
        (Cow::Owned(to_crlf(edit.old)), Cow::Owned(to_crlf(edit.new)))
    } else {
        (Cow::Borrowed(edit.old), Cow::Borrowed(edit.new))
    }
}

/// Where `edit`'s old text occurs in `content` (which has no BOM), as [`apply`] finds it: the
/// byte offsets of the first `most` non-overlapping occurrences, in order (one more when there
/// are more, so a caller can tell), and the length of each (the old text as matched there:
/// `\n` is `\r\n` in a CRLF file).
pub fn occurrences(content: &str, edit: &Replacement<'_>, most: usize) -> (Vec<usize>, usize) {
    let (old, _) = as_in(content, edit);
    let found = memchr::memmem::find_iter(content.as_bytes(), old.as_bytes()).take(most.saturating_add(1));
    (found.collect(), old.len())
}

/// Replaces `old` by `new` in `content` (which has no BOM). In a CRLF file, `\n` in `old` and
/// `new` stands for `\r\n`, so the file keeps its endings. Returns the new text, the number
/// of replacements and where the first ones landed.
pub fn apply(content: &str, edit: &Replacement<'_>) -> Result<Applied, Miss> {
    let replace_all = edit.all;
    let (old, new) = as_in(content, edit);
    // One pass finds every (non-overlapping) occurrence; the new text is built from them.
    let hits: Vec<usize> = memchr::memmem::find_iter(content.as_bytes(), old.as_bytes()).collect();
    match hits.len() {
        0 => return Err(Miss::NoMatch { hint: hint(content, &old) }),
        1 => {}
        _ if replace_all => {}
        n => return Err(Miss::Ambiguous(n as u64)),
    }
    let mut out = String::with_capacity(content.len() - hits.len() * old.len() + hits.len() * new.len());
    let mut spans = Vec::with_capacity(hits.len().min(MAX_SPANS));
    let mut from = 0;
    for &at in &hits {
        out.push_str(&content[from..at]);
        if spans.len() < MAX_SPANS {
            spans.push(out.len()..out.len() + new.len());
        }
        out.push_str(&new);
        from = at + old.len();
    }
    out.push_str(&content[from..]);
    Ok(Applied { text: out, replacements: hits.len() as u64, spans })
}

/// One edited place of a new version, as `read` would number it: lines `start_line..` (the
/// replaced text's lines and up to two lines of context each side), each without its line
/// ending and cut at [`REGION_LINE_MAX_CHARS`] characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Region {
    /// 1-based number of the first line shown.
    pub start_line: u64,
    /// The lines (at most a couple dozen; a longer region is cut, see `cut`).
    pub lines: Vec<String>,
    /// Whether lines of the region were left out at its end.
    pub cut: bool,
    /// Replacements inside this region.
    pub replacements: u64,
}

/// The first edited places of `text` (a new version without BOM), from the byte ranges of
/// the first replacements (in order): each widened by two lines of context, neighbours merged,
/// at most three regions. Costs the text up to the last region, not the whole file: lines are
/// counted up to each place, and a region's first line is found back from its place.
pub fn regions(text: &str, spans: &[std::ops::Range<usize>]) -> Vec<Region> {
    let bytes = text.as_bytes();
    if bytes.is_empty() {
        return Vec::new();
    }
    // The start of the line holding byte `at`.
    let line_start = |at: usize| memchr::memrchr(b'\n', &bytes[..at]).map_or(0, |n| n + 1);
    // 0-based line of each span's first and last byte (a place past the end is on the last
    // line), counted in one forward pass.
    let (mut line, mut counted) = (0u64, 0usize);
    let mut line_of = |offset: usize| {
        let offset = offset.min(bytes.len() - 1);
        if offset > counted {
            line += memchr::memchr_iter(b'\n', &bytes[counted..offset]).count() as u64;
            counted = offset;
        }
        line
    };
    // (first line, last line without the clamp to the text's end, replacements, the first
    // line's start).
    let mut ranges: Vec<(u64, u64, u64, usize)> = Vec::new();
    for span in spans {
        let first = line_of(span.start);
        let last = if span.end > span.start { line_of(span.end - 1) } else { first };
        let lo = first.saturating_sub(REGION_CONTEXT);
        let hi = last + REGION_CONTEXT;
        let full = ranges.len() == MAX_REGIONS;
        match ranges.last_mut() {
            Some((_, end, count, _)) if lo <= *end + 1 => {
                *end = (*end).max(hi);
                *count += 1;
            }
            _ if full => break,
            _ => {
                let mut start = line_start(span.start.min(bytes.len() - 1));
                for _ in lo..first {
                    start = line_start(start - 1);
                }
                ranges.push((lo, hi, 1, start));
            }
        }
    }
    // The lines: a line exists while its start is before the end of the text.
    let mut out = Vec::with_capacity(ranges.len());
    for (lo, hi, replacements, mut at) in ranges {
        let mut lines = Vec::new();
        let mut line = lo;
        while line <= hi && at < bytes.len() && lines.len() < REGION_MAX_LINES {
            let end = memchr::memchr(b'\n', &bytes[at..]).map_or(bytes.len(), |n| at + n);
            lines.push(region_line(&text[at..end]));
            at = (end + 1).min(bytes.len());
            line += 1;
        }
        out.push(Region { start_line: lo + 1, cut: line <= hi && at < bytes.len(), lines, replacements });
    }
    out
}

/// A region's line as the answer shows it: without its `\r`, cut at
/// [`REGION_LINE_MAX_CHARS`] characters with an ellipsis.
fn region_line(raw: &str) -> String {
    let raw = raw.strip_suffix('\r').unwrap_or(raw);
    match raw.char_indices().nth(REGION_LINE_MAX_CHARS) {
        Some((cut, _)) => format!("{}…", &raw[..cut]),
        None => raw.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(content: &str, old: &str, new: &str, all: bool) -> Result<(String, u64), Miss> {
        super::apply(content, &Replacement::new(old, new, all).expect("a valid edit"))
            .map(|applied| (applied.text, applied.replacements))
    }

    #[test]
    fn an_edit_is_valid_by_construction() {
        assert_eq!(Replacement::new("", "x", false), Err(InvalidEdit::Empty));
        assert_eq!(Replacement::new("a", "a", true), Err(InvalidEdit::Identical));
        assert!(Replacement::new("a", "", false).is_ok(), "deleting text is an edit");
    }

    #[test]
    fn unique_and_all_and_ambiguous() {
        assert_eq!(apply("a b a", "b", "c", false), Ok(("a c a".into(), 1)));
        assert_eq!(apply("a b a", "a", "x", false), Err(Miss::Ambiguous(2)));
        assert_eq!(apply("a b a", "a", "x", true), Ok(("x b x".into(), 2)));
        assert_eq!(apply("aaa", "aa", "b", true), Ok(("ba".into(), 1)), "matches do not overlap");
    }

    #[test]
    fn crlf_files_match_lf_text_and_keep_crlf() {
        let file = "one\r\ntwo\r\nthree\r\n";
        assert_eq!(
            apply(file, "one\ntwo", "uno\ndos\ndos", false),
            Ok(("uno\r\ndos\r\ndos\r\nthree\r\n".into(), 1))
        );
        assert_eq!(apply(file, "two", "2\n2", false), Ok(("one\r\n2\r\n2\r\nthree\r\n".into(), 1)));
        // Mixed endings are left exactly as given.
        assert_eq!(apply("a\r\nb\nc", "b\nc", "x", false), Ok(("a\r\nx".into(), 1)));
    }

    #[test]
    fn final_newline_presence_is_untouched() {
        assert_eq!(apply("x = 1", "1", "2", false), Ok(("x = 2".into(), 1)));
        assert_eq!(apply("x = 1\n", "1", "2", false), Ok(("x = 2\n".into(), 1)));
    }

    #[test]
    fn near_misses_get_hints() {
        let file = "fn main() {\n\tprintln!(\"hi\");\n}\n";
        let miss = apply(file, "    println!(\"hi\");", "x", false);
        assert!(
            matches!(&miss, Err(Miss::NoMatch { hint: Some(h) }) if h.contains("whitespace")),
            "{miss:?}"
        );
        let miss = apply(file, "     1\tfn main() {", "x", false);
        assert!(
            matches!(&miss, Err(Miss::NoMatch { hint: Some(h) }) if h.contains("line-number")),
            "{miss:?}"
        );
        assert_eq!(apply(file, "nothing like it", "x", false), Err(Miss::NoMatch { hint: None }));
    }

    #[test]
    fn a_write_keeps_bom_and_crlf_without_doubling() {
        let keep = |content, bom, crlf| with_conventions(content, bom, crlf).into_owned();
        assert_eq!(keep("a\nb\n", false, false), b"a\nb\n");
        assert!(matches!(with_conventions("a\nb", false, false), Cow::Borrowed(_)), "nothing to do, no copy");
        assert_eq!(keep("a\nb\n", true, false), b"\xEF\xBB\xBFa\nb\n");
        assert_eq!(keep("\u{FEFF}a\n", true, false), b"\xEF\xBB\xBFa\n", "never two BOMs");
        assert_eq!(keep("a\nb\r\nc", false, true), b"a\r\nb\r\nc", "bare \\n only");
        assert_eq!(keep("\n\n", true, true), b"\xEF\xBB\xBF\r\n\r\n");
        assert!(matches!(with_conventions("a\r\nb", false, true), Cow::Borrowed(_)));
    }

    #[test]
    fn nul_bytes_are_located() {
        assert_eq!(nul_at("abc"), None);
        assert_eq!(nul_at("\0"), Some(NulAt { line: 1, column: 1, offset: 0 }));
        assert_eq!(nul_at("ab\nçd\0e"), Some(NulAt { line: 2, column: 3, offset: 6 }));
        assert_eq!(
            Replacement::new("a", "b\0", false),
            Err(InvalidEdit::Nul(NulAt { line: 1, column: 2, offset: 1 }))
        );
    }

    #[test]
    fn regions_of_an_emptied_file_and_of_the_end() {
        let change = Replacement::new("all", "", false).unwrap();
        let applied = super::apply("all", &change).unwrap();
        assert!(regions(&applied.text, &applied.spans).is_empty());
        let change = Replacement::new("c\n", "", false).unwrap();
        let applied = super::apply("a\nb\nc\n", &change).unwrap();
        let shown = regions(&applied.text, &applied.spans);
        assert_eq!(
            shown,
            [Region { start_line: 1, lines: vec!["a".into(), "b".into()], cut: false, replacements: 1 }]
        );
    }

    /// [`regions`] the way it was before: every line of `text` counted, and skipped one by one
    /// up to each region (the property test's oracle).
    fn regions_by_counting_every_line(text: &str, spans: &[std::ops::Range<usize>]) -> Vec<Region> {
        let bytes = text.as_bytes();
        let total = memchr::memchr_iter(b'\n', bytes).count() as u64
            + u64::from(!bytes.is_empty() && !bytes.ends_with(b"\n"));
        if total == 0 {
            return Vec::new();
        }
        // 0-based line ranges (inclusive) of each span, one forward pass.
        let (mut line, mut at) = (0u64, 0usize);
        let mut line_of = |offset: usize| {
            line += memchr::memchr_iter(b'\n', &bytes[at..offset]).count() as u64;
            at = offset;
            line
        };
        let mut ranges: Vec<(u64, u64, u64)> = Vec::new();
        for span in spans {
            let first = line_of(span.start);
            let last = if span.end > span.start { line_of(span.end - 1) } else { first };
            let (first, last) = (first.min(total - 1), last.min(total - 1));
            let lo = first.saturating_sub(REGION_CONTEXT);
            let hi = (last + REGION_CONTEXT).min(total - 1);
            let full = ranges.len() == MAX_REGIONS;
            match ranges.last_mut() {
                Some((_, end, count)) if lo <= *end + 1 => {
                    *end = (*end).max(hi);
                    *count += 1;
                }
                _ if full => break,
                _ => ranges.push((lo, hi, 1)),
            }
        }
        // The lines, another forward pass.
        let mut out = Vec::with_capacity(ranges.len());
        let (mut line, mut at) = (0u64, 0usize);
        for (lo, hi, replacements) in ranges {
            while line < lo {
                at = memchr::memchr(b'\n', &bytes[at..]).map_or(bytes.len(), |n| at + n + 1);
                line += 1;
            }
            let mut lines = Vec::new();
            while line <= hi && lines.len() < REGION_MAX_LINES {
                let end = memchr::memchr(b'\n', &bytes[at..]).map_or(bytes.len(), |n| at + n);
                lines.push(region_line(&text[at..end]));
                at = (end + 1).min(bytes.len());
                line += 1;
            }
            out.push(Region { start_line: lo + 1, cut: line <= hi, lines, replacements });
        }
        out
    }

    #[test]
    fn regions_are_those_of_every_line_counted() {
        use proptest::prelude::*;
        let line = prop_oneof![Just(""), Just("x"), Just("ab c"), Just("é\r"), Just("  yy")];
        let text = proptest::collection::vec(line, 0..40).prop_map(|lines| lines.join("\n"));
        let case = (text, any::<bool>(), proptest::collection::vec((0usize..400, 0usize..30), 0..8));
        proptest!(|((text, newline, raw) in case)| {
            let text = if newline { format!("{text}\n") } else { text };
            let len = text.len();
            let mut spans: Vec<std::ops::Range<usize>> = raw
                .into_iter()
                .map(|(at, n)| {
                    let at = at.min(len);
                    at..(at + n).min(len)
                })
                .filter(|r| text.is_char_boundary(r.start) && text.is_char_boundary(r.end))
                .collect();
            spans.sort_by_key(|r| r.start);
            // Replacements do not overlap.
            let mut from = 0;
            spans.retain(|r| {
                let keep = r.start >= from;
                if keep {
                    from = r.end.max(r.start + 1);
                }
                keep
            });
            prop_assert_eq!(regions(&text, &spans), regions_by_counting_every_line(&text, &spans));
        });
    }
}
