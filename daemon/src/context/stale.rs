//! What a stale refusal shows: a unified diff from the version a session last saw (its bytes
//! from the provider's content store) to the file's current content, lines as `read` shows
//! them and hunk headers numbered as in both versions (`+N,M`: the current file's lines), bounded
//! in lines and bytes. Pure: [`super::FileContext`] decides what it re-authorizes.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use similar::{Algorithm, DiffOp, DiffTag};

use crate::provider::edit::BOM;

/// Most lines a shown diff may have (hunk headers included, the two file headers not).
pub const MAX_DIFF_LINES: usize = 200;
/// Most bytes a shown diff may have.
pub const MAX_DIFF_BYTES: usize = 16 * 1024;
/// Unchanged lines shown around each change.
const CONTEXT_LINES: usize = 3;
/// Longest time spent finding a small diff; past it a correct but coarser one is taken.
const DIFF_TIME: Duration = Duration::from_millis(100);

/// What a stale refusal can show of the change since the session's last look.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChangeSince {
    /// The whole change, as a unified diff (empty when no line differs: only line endings, the
    /// BOM or the final newline changed). The session's record moved to the version shown.
    Shown(String),
    /// The change is over the bounds ([`MAX_DIFF_LINES`], [`MAX_DIFF_BYTES`]); nothing moved.
    TooLarge,
    /// Unknown: the file was deleted, the version last seen is not stored, a version is over the
    /// store's per-file cap or not text. Nothing moved.
    Unknown,
}

impl ChangeSince {
    /// Whether the session's record moved to the current version.
    pub fn reauthorized(&self) -> bool {
        matches!(self, Self::Shown(_))
    }

    /// The diff, when shown.
    pub fn diff(&self) -> Option<&str> {
        match self {
            Self::Shown(diff) => Some(diff),
            Self::TooLarge | Self::Unknown => None,
        }
    }
}

/// Lines as `read` shows them (BOM hidden, no terminator, no trailing `\r`); `None` when the
/// bytes are not text.
pub(super) fn lines(bytes: &[u8]) -> Option<Vec<&str>> {
    let bytes = bytes.strip_prefix(BOM).unwrap_or(bytes);
    if memchr::memchr(0, bytes).is_some() {
        return None;
    }
    let text = std::str::from_utf8(bytes).ok()?;
    if text.is_empty() {
        return Some(Vec::new());
    }
    let body = text.strip_suffix('\n').unwrap_or(text);
    Some(body.split('\n').map(|line| line.strip_suffix('\r').unwrap_or(line)).collect())
}

/// The line diff from `old` to `new` (lines as [`lines`] gives them): Myers, and past
/// [`DIFF_TIME`] a coarser one that is still correct (it may show more lines as changed, never
/// fewer). Each op's positions are where the ops before it end: `similar` can place a
/// deletion's empty range in the new lines (an insertion's in the old ones) elsewhere (from
/// `y x` to `x x`: a deletion "at" new line 1 before an unchanged line at new line 0), which
/// would number a hunk wrong; its order and lengths are right, so positions are counted again
/// from them.
pub(super) fn ops(old: &[&str], new: &[&str]) -> Vec<DiffOp> {
    let found =
        similar::capture_diff_slices_deadline(Algorithm::Myers, old, new, Some(Instant::now() + DIFF_TIME));
    let (mut old_index, mut new_index) = (0, 0);
    found
        .into_iter()
        .map(|op| {
            let placed = match op {
                DiffOp::Equal { len, .. } => DiffOp::Equal { old_index, new_index, len },
                DiffOp::Delete { old_len, .. } => DiffOp::Delete { old_index, old_len, new_index },
                DiffOp::Insert { new_len, .. } => DiffOp::Insert { old_index, new_index, new_len },
                DiffOp::Replace { old_len, new_len, .. } => {
                    DiffOp::Replace { old_index, old_len, new_index, new_len }
                }
            };
            old_index += op.old_range().len();
            new_index += op.new_range().len();
            placed
        })
        .collect()
}

/// A hunk header's range: 1-based start and length; an empty range starts at the line before.
fn range(start: usize, len: usize) -> String {
    let first = if len == 0 { start } else { start + 1 };
    format!("{first},{len}")
}

/// The change from `old` (the version last seen) to `new` (the current one) of the file shown
/// as `display`.
pub fn diff(display: &str, old: &[u8], new: &[u8]) -> ChangeSince {
    diff_labelled(display, ("as you last saw it", "now"), old, new)
}

/// [`diff`] with other labels on the two file headers (`--- PATH (old label)`,
/// `+++ PATH (new label)`).
pub fn diff_labelled(display: &str, labels: (&str, &str), old: &[u8], new: &[u8]) -> ChangeSince {
    match unified(display, labels, old, new, false) {
        Some((_, true)) => ChangeSince::TooLarge,
        Some((diff, false)) => ChangeSince::Shown(diff),
        None => ChangeSince::Unknown,
    }
}

/// [`diff_labelled`] cut at the same bounds instead of refused there: the diff up to them (whole
/// lines), and whether it was cut. `None` when a side is not text.
pub fn diff_cut(display: &str, labels: (&str, &str), old: &[u8], new: &[u8]) -> Option<(String, bool)> {
    unified(display, labels, old, new, true)
}

/// Lines added and removed from `old` to `new` (as [`lines`] gives them); `None` when a side
/// is not text.
pub fn stat(old: &[u8], new: &[u8]) -> Option<(u64, u64)> {
    let (old, new) = (lines(old)?, lines(new)?);
    let (mut added, mut removed) = (0u64, 0u64);
    for op in ops(&old, &new) {
        added += op.new_range().len() as u64 * u64::from(op.tag() != DiffTag::Equal);
        removed += op.old_range().len() as u64 * u64::from(op.tag() != DiffTag::Equal);
    }
    Some((added, removed))
}

/// The unified diff, and whether it went past the bounds: then cut there when `cut` (else what
/// was written so far, not to be shown).
fn unified(display: &str, labels: (&str, &str), old: &[u8], new: &[u8], cut: bool) -> Option<(String, bool)> {
    let (Some(old), Some(new)) = (lines(old), lines(new)) else {
        return None;
    };
    let groups = similar::group_diff_ops(ops(&old, &new), CONTEXT_LINES);
    if groups.is_empty() {
        return Some((String::new(), false));
    }
    let mut out = format!("--- {display} ({})\n+++ {display} ({})\n", labels.0, labels.1);
    let mut count = 0usize;
    for group in groups {
        let (Some(first), Some(last)) = (group.first(), group.last()) else { continue };
        let (old_start, new_start) = (first.old_range().start, first.new_range().start);
        let (old_end, new_end) = (last.old_range().end, last.new_range().end);
        let _ = writeln!(
            out,
            "@@ -{} +{} @@",
            range(old_start, old_end - old_start),
            range(new_start, new_end - new_start)
        );
        count += 1;
        for op in &group {
            let (tag, old_range, new_range) = op.as_tag_tuple();
            let mut push = |sign: char, line: &str| {
                if count > MAX_DIFF_LINES || out.len() > MAX_DIFF_BYTES {
                    return;
                }
                let at = out.len();
                out.push(sign);
                out.push_str(line);
                out.push('\n');
                count += 1;
                if cut && (count > MAX_DIFF_LINES || out.len() > MAX_DIFF_BYTES) {
                    out.truncate(at);
                    count = MAX_DIFF_LINES + 1;
                }
            };
            match tag {
                DiffTag::Equal => new[new_range].iter().for_each(|line| push(' ', line)),
                DiffTag::Delete => old[old_range].iter().for_each(|line| push('-', line)),
                DiffTag::Insert => new[new_range].iter().for_each(|line| push('+', line)),
                DiffTag::Replace => {
                    old[old_range].iter().for_each(|line| push('-', line));
                    new[new_range].iter().for_each(|line| push('+', line));
                }
            }
            if count > MAX_DIFF_LINES || out.len() > MAX_DIFF_BYTES {
                return Some((out, true));
            }
        }
    }
    Some((out, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hunk_that_starts_with_a_deletion_is_numbered_right() {
        // `similar` puts the deletion of `y` at new line 1, after the `x` it keeps at line 0.
        expect_test::expect![[r#"
            --- a.txt (as you last saw it)
            +++ a.txt (now)
            @@ -1,2 +1,2 @@
            -y
             x
            +x
        "#]]
        .assert_eq(diff("a.txt", b"y\nx\n", b"x\nx\n").diff().unwrap());
        expect_test::expect![[r#"
            --- a.txt (as you last saw it)
            +++ a.txt (now)
            @@ -1,2 +1,4 @@
            -xx
             x
            +x
            +y
            +x
        "#]]
        .assert_eq(diff("a.txt", b"xx\nx\n", b"x\nx\ny\nx\n").diff().unwrap());
    }

    #[test]
    fn numbered_as_the_current_version() {
        let old = b"one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\nten\n";
        let new = b"zero\none\ntwo\nthree\nfour\nfive\nsix\nseven\nEIGHT\nnine\nten\n";
        expect_test::expect![[r#"
            --- a.txt (as you last saw it)
            +++ a.txt (now)
            @@ -1,3 +1,4 @@
            +zero
             one
             two
             three
            @@ -5,6 +6,6 @@
             five
             six
             seven
            -eight
            +EIGHT
             nine
             ten
        "#]]
        .assert_eq(diff_text(&diff("a.txt", old, new)));
    }

    fn diff_text(change: &ChangeSince) -> &str {
        change.diff().expect("a diff")
    }

    #[test]
    fn line_endings_and_bom_are_not_changes_of_lines() {
        let change = diff("a.txt", b"\xEF\xBB\xBFa\r\nb\r\n", b"a\nb");
        assert_eq!(change, ChangeSince::Shown(String::new()));
        assert!(change.reauthorized());
    }

    #[test]
    fn too_large_and_not_text() {
        let old: String = (0..300).map(|i| format!("{i}\n")).collect();
        let new: String = (0..300).map(|i| format!("{i}x\n")).collect();
        assert_eq!(diff("a.txt", old.as_bytes(), new.as_bytes()), ChangeSince::TooLarge);
        let long = "y".repeat(20_000);
        assert_eq!(diff("a.txt", b"x\n", long.as_bytes()), ChangeSince::TooLarge);
        assert_eq!(diff("a.txt", b"x\n", b"\0"), ChangeSince::Unknown);
        assert!(!ChangeSince::TooLarge.reauthorized() && !ChangeSince::Unknown.reauthorized());
    }
}
