//! What a change introduced: the diagnostics after it minus those before it, matched by what
//! they say (source, code, severity, message), the positions from before moved through the
//! change's line shift. A line shift never makes an old diagnostic new: one that kept its words
//! and moved with the lines around it matches where it went, and one that moved otherwise (within
//! edited lines, or elsewhere) still matches another of the same words left over.

use std::collections::HashMap;
use std::time::Duration;

use super::wire::Diagnostic;

/// How the lines of an old text map to a new one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LineShift {
    /// The changed hunks, in order: (old start, old length, new start, new length), 0-based.
    hunks: Vec<(u32, u32, u32, u32)>,
}

/// Longest a line diff may take before it settles for a coarser answer.
const DIFF_TIMEOUT: Duration = Duration::from_millis(50);

impl LineShift {
    /// The shift from `old` to `new`.
    pub fn between(old: &str, new: &str) -> Self {
        use similar::{DiffOp, TextDiff};
        let diff = TextDiff::configure().timeout(DIFF_TIMEOUT).diff_lines(old, new);
        let n = |v: usize| u32::try_from(v).unwrap_or(u32::MAX);
        let hunks = diff
            .ops()
            .iter()
            .filter(|op| !matches!(op, DiffOp::Equal { .. }))
            .map(|op| {
                let (old, new) = (op.old_range(), op.new_range());
                (n(old.start), n(old.len()), n(new.start), n(new.len()))
            })
            .collect();
        Self { hunks }
    }

    /// Where old line `line` is now: moved by the hunks above it; a line inside a changed hunk
    /// goes to that hunk's start.
    pub fn map(&self, line: u32) -> u32 {
        let mut delta: i64 = 0;
        for &(old_start, old_len, new_start, new_len) in &self.hunks {
            if line < old_start {
                break;
            }
            if line < old_start.saturating_add(old_len) {
                return new_start;
            }
            delta += i64::from(new_len) - i64::from(old_len);
        }
        u32::try_from(i64::from(line) + delta).unwrap_or(0)
    }
}

/// The indices in `after` of the diagnostics `before` (of the old text) does not account for,
/// its positions moved by `shift`.
pub fn introduced(before: &[Diagnostic], after: &[Diagnostic], shift: &LineShift) -> Vec<usize> {
    let mut left: HashMap<_, Vec<u32>> = HashMap::new();
    for diagnostic in before {
        left.entry(diagnostic.key()).or_default().push(shift.map(diagnostic.line));
    }
    let mut matched = vec![false; after.len()];
    // Where it went first, then any left of the same words.
    for (i, diagnostic) in after.iter().enumerate() {
        if let Some(lines) = left.get_mut(&diagnostic.key())
            && let Some(at) = lines.iter().position(|&l| l == diagnostic.line)
        {
            lines.swap_remove(at);
            matched[i] = true;
        }
    }
    for (i, diagnostic) in after.iter().enumerate() {
        if matched[i] {
            continue;
        }
        if let Some(lines) = left.get_mut(&diagnostic.key())
            && lines.pop().is_some()
        {
            matched[i] = true;
        }
    }
    (0..after.len()).filter(|&i| !matched[i]).collect()
}

#[cfg(test)]
mod tests {
    use super::super::wire::Severity;
    use super::*;

    fn d(line: u32, message: &str) -> Diagnostic {
        Diagnostic {
            line,
            character: 0,
            severity: Severity::Error,
            message: message.into(),
            source: Some("t".into()),
            code: None,
        }
    }

    #[test]
    fn lines_move_with_what_was_inserted_and_removed_above_them() {
        let old = "a\nb\nc\nd\n";
        let shift = LineShift::between(old, "x\ny\na\nb\nc\nd\n");
        assert_eq!((shift.map(0), shift.map(3)), (2, 5));
        let shift = LineShift::between(old, "a\nd\n");
        assert_eq!((shift.map(0), shift.map(1), shift.map(3)), (0, 1, 1));
        let shift = LineShift::between(old, "a\nB\nc\nd\n");
        assert_eq!((shift.map(1), shift.map(2)), (1, 2), "a line edited in place keeps its place");
        assert_eq!(LineShift::default().map(7), 7);
    }

    #[test]
    fn an_insertion_above_an_error_never_makes_it_new() {
        let before = [d(10, "old error"), d(20, "other")];
        let old: String = (0..30).map(|n| format!("line {n}\n")).collect();
        let new = format!("inserted\ninserted\n{old}");
        let shift = LineShift::between(&old, &new);
        let after = [d(12, "old error"), d(22, "other"), d(0, "fresh")];
        assert_eq!(introduced(&before, &after, &shift), [2]);
        // Without the shift, the two old ones would look new.
        assert_eq!(
            introduced(&before, &after, &LineShift::default()),
            [2],
            "same words left over still match"
        );
        // One more of the same words than before: one is new.
        let after = [d(12, "old error"), d(15, "old error"), d(22, "other")];
        assert_eq!(introduced(&before, &after, &shift), [1]);
        // Fixed: nothing new.
        assert!(introduced(&before, &[d(22, "other")], &shift).is_empty());
    }
}
