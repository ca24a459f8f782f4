//! Merged stale edits (`initialize` `staleEdits: "merge"`, the `edit` tool only): whether an
//! edit made against the version a session last saw may be applied to the file's current
//! version instead. Yes only when the old text occurs there exactly as many times as it did in
//! the version seen (once, or every time with `replace_all`), no line the outside change
//! touched is in or next to a matched place, and each match is the very occurrence the session
//! saw, moved only by lines changed elsewhere. Pure: [`super::FileContext`] reads the versions,
//! shows the change (see [`super::stale`]) and writes only if the version checked here is still
//! current.

use similar::DiffTag;

use super::stale;
use crate::provider::edit::{self, BOM, Replacement};

/// Why a stale edit is not merged (the caller then refuses it as stale, as without the option).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unmerged {
    /// A version is not text (or not valid UTF-8, or holds a NUL byte).
    NotText,
    /// The edit does not fit the version seen: its old text is not there, or is there several
    /// times without `replace_all`.
    Unfit,
    /// The old text occurs a different number of times now.
    Count {
        /// Occurrences in the version seen.
        seen: usize,
        /// Occurrences now.
        now: usize,
    },
    /// A changed line is inside a matched place or right above or below it.
    Touched,
    /// A match now is not the occurrence seen (the same count, but not the same places).
    Moved,
    /// More than [`MAX_PLACES`] places: not checked one by one.
    Many,
}

/// The most places a merged `replace_all` edit checks (each costs a position kept for both
/// versions; a one-character old text could otherwise keep one per byte of the file).
pub const MAX_PLACES: usize = 1000;

/// The text of a version as an edit matches it: the BOM left out; `None` when it is not text.
fn text(bytes: &[u8]) -> Option<&str> {
    let body = bytes.strip_prefix(BOM).unwrap_or(bytes);
    let text = std::str::from_utf8(body).ok()?;
    (memchr::memchr(0, body).is_none()).then_some(text)
}

/// The byte offset where each line of `text` starts, as [`stale::lines`] splits it (a final
/// line break ends the last line; it starts none).
fn line_starts(text: &str) -> Vec<usize> {
    let bytes = text.as_bytes();
    let mut starts = vec![0];
    starts.extend(memchr::memchr_iter(b'\n', bytes).map(|at| at + 1).filter(|&at| at < bytes.len()));
    starts
}

/// The 0-based line holding byte `at`.
fn line_of(starts: &[usize], at: usize) -> usize {
    starts.partition_point(|&start| start <= at).saturating_sub(1)
}

/// Whether `change`, made against `seen` (the version last seen), may be applied to `now` (the
/// current version) instead, as one edit of the same occurrences.
pub fn check(seen_bytes: &[u8], now_bytes: &[u8], change: &Replacement<'_>) -> Result<(), Unmerged> {
    let (Some(seen), Some(now)) = (text(seen_bytes), text(now_bytes)) else { return Err(Unmerged::NotText) };
    let (seen_hits, _) = edit::occurrences(seen, change, MAX_PLACES);
    let count = seen_hits.len();
    if count == 0 || (count > 1 && !change.all()) {
        return Err(Unmerged::Unfit);
    }
    if count > MAX_PLACES {
        return Err(Unmerged::Many);
    }
    let (now_hits, len) = edit::occurrences(now, change, MAX_PLACES);
    if now_hits.len() != count {
        return Err(Unmerged::Count { seen: count, now: now_hits.len() });
    }
    let (Some(seen_lines), Some(now_lines)) = (stale::lines(seen_bytes), stale::lines(now_bytes)) else {
        return Err(Unmerged::NotText);
    };
    // The runs of lines the outside change left alone, in order in both versions: (lines in
    // the version seen, lines now). Only these are trusted (not where the diff places an
    // insertion or a deletion), so a changed line is exactly one that is in no run.
    let runs: Vec<_> = stale::ops(&seen_lines, &now_lines)
        .into_iter()
        .filter(|op| op.tag() == DiffTag::Equal)
        .map(|op| (op.old_range(), op.new_range()))
        .collect();
    let (seen_starts, now_starts) = (line_starts(seen), line_starts(now));
    for (&at, &was) in now_hits.iter().zip(&seen_hits) {
        let (first, last) = (line_of(&now_starts, at), line_of(&now_starts, at + len - 1));
        // The run holding the match's first line must hold the whole match and the line on
        // either side of it; at an edge of the file, it must reach that edge in both versions
        // (nothing added or removed there).
        let index = runs.partition_point(|(_, new)| new.end <= first);
        let Some((old, new)) = runs.get(index).filter(|(_, new)| new.contains(&first)) else {
            return Err(Unmerged::Touched);
        };
        let above = if first == 0 { old.start == 0 } else { new.start < first };
        let below = if last + 1 == now_lines.len() {
            new.end == now_lines.len() && old.end == seen_lines.len()
        } else {
            last + 1 < new.end
        };
        if !(above && below) {
            return Err(Unmerged::Touched);
        }
        // Untouched: the match is the occurrence seen only if it sat at the same place of the
        // same line there.
        let line = old.start + (first - new.start);
        let mapped = seen_starts.get(line).map(|start| start + (at - now_starts[first]));
        if mapped != Some(was) {
            return Err(Unmerged::Moved);
        }
    }
    Ok(())
}

/// Test builds (`failpoints`): the point between a merge's check and its write. Armed as
/// `context::merge::checked=return(DIR)`, it creates `DIR/merge.started` and waits (at most a
/// minute) until `DIR/merge.go` exists, so a test can change the file right there.
#[cfg(feature = "failpoints")]
pub(super) fn checked() {
    fail::fail_point!("context::merge::checked", |dir: Option<String>| {
        let Some(dir) = dir.map(std::path::PathBuf::from) else { return };
        let _ = std::fs::write(dir.join("merge.started"), b"");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !dir.join("merge.go").exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(seen: &str, now: &str, old: &str, new: &str, all: bool) -> Result<(), Unmerged> {
        super::check(seen.as_bytes(), now.as_bytes(), &Replacement::new(old, new, all).unwrap())
    }

    #[test]
    fn more_places_than_are_checked_are_refused() {
        // The outside change (line 1) keeps away from every `x` line.
        let versions = |places: usize| {
            let xs = "x\n".repeat(places);
            (format!("a\nb\nc\n{xs}"), format!("A\nb\nc\n{xs}"))
        };
        let (seen, now) = versions(MAX_PLACES);
        assert_eq!(check(&seen, &now, "x", "y", true), Ok(()));
        let (seen, now) = versions(MAX_PLACES + 1);
        assert_eq!(check(&seen, &now, "x", "y", true), Err(Unmerged::Many));
    }

    /// Ten lines `l1`…`l10`, with `f` applied to each (line number, text).
    fn file(f: impl Fn(usize, String) -> String) -> String {
        (1..=10).map(|i| f(i, format!("l{i}\n"))).collect()
    }

    #[test]
    fn a_change_two_lines_away_merges() {
        let seen = file(|_, l| l);
        // The match is line 5; lines 3 and 7 changed (one unchanged line between).
        let now = file(|i, l| if i == 3 || i == 7 { format!("changed {i}\n") } else { l });
        assert_eq!(check(&seen, &now, "l5\n", "five\n", false), Ok(()));
        // Lines added at the top and removed at the end move the match; it is still the same.
        let now = format!("a\nb\n{}", file(|i, l| if i >= 9 { String::new() } else { l }));
        assert_eq!(check(&seen, &now, "l5\n", "five\n", false), Ok(()));
        // A match of part of a line, and of several lines.
        assert_eq!(check(&seen, &now, "5", "five", false), Ok(()));
        assert_eq!(check(&seen, &now, "l4\nl5\nl6", "x", false), Ok(()));
    }

    #[test]
    fn a_changed_line_in_or_next_to_a_match_refuses() {
        let seen = file(|_, l| l);
        // Each changed line keeps its number at its end, so a match of part of it still occurs.
        let changed = |at: usize| file(move |i, l| if i == at { format!("changed l{i}\n") } else { l });
        for at in [4, 5, 6] {
            assert_eq!(check(&seen, &changed(at), "l5", "five", false), Err(Unmerged::Touched), "line {at}");
        }
        assert_eq!(check(&seen, &changed(3), "l5", "five", false), Ok(()));
        assert_eq!(check(&seen, &changed(7), "l5", "five", false), Ok(()));
        // A match of lines 4 (its end) to 6: lines 3 and 7 are next to it, 4 inside it.
        for at in [3, 4, 7] {
            assert_eq!(
                check(&seen, &changed(at), "l4\nl5\nl6", "x", false),
                Err(Unmerged::Touched),
                "line {at}"
            );
        }
        assert_eq!(check(&seen, &changed(2), "l4\nl5\nl6", "x", false), Ok(()));
        assert_eq!(check(&seen, &changed(8), "l4\nl5\nl6", "x", false), Ok(()));
    }

    #[test]
    fn an_insertion_or_deletion_next_to_a_match_refuses() {
        let seen = file(|_, l| l);
        // A line inserted right above or right below line 5, or deleted there.
        let above = file(|i, l| if i == 5 { format!("new\n{l}") } else { l });
        let below = file(|i, l| if i == 5 { format!("{l}new\n") } else { l });
        let gone_above = file(|i, l| if i == 4 { String::new() } else { l });
        let gone_below = file(|i, l| if i == 6 { String::new() } else { l });
        for now in [&above, &below, &gone_above, &gone_below] {
            assert_eq!(check(&seen, now, "l5", "five", false), Err(Unmerged::Touched), "{now}");
        }
        // Two lines away, either way, is fine.
        let gone = file(|i, l| if i == 3 || i == 7 { String::new() } else { l });
        assert_eq!(check(&seen, &gone, "l5", "five", false), Ok(()));
        // At the edges of the file: the first and the last line.
        let first = format!("top\n{}", file(|_, l| l));
        assert_eq!(check(&seen, &first, "l1\n", "one\n", false), Err(Unmerged::Touched));
        assert_eq!(check(&seen, &first, "l3\n", "three\n", false), Ok(()));
        let last = format!("{}end\n", file(|_, l| l));
        assert_eq!(check(&seen, &last, "l10", "ten", false), Err(Unmerged::Touched));
        assert_eq!(check(&seen, &last, "l8", "eight", false), Ok(()));
    }

    #[test]
    fn the_count_must_be_the_same_and_fit_the_edit() {
        let seen = file(|_, l| l);
        // The old text now occurs twice (added far away), or no longer (removed).
        let twice = format!("{}l5\n", file(|_, l| l));
        assert_eq!(check(&seen, &twice, "l5\n", "five\n", false), Err(Unmerged::Count { seen: 1, now: 2 }));
        let none = file(|i, l| if i == 5 { "L5\n".into() } else { l });
        assert_eq!(check(&seen, &none, "l5\n", "five\n", false), Err(Unmerged::Count { seen: 1, now: 0 }));
        // An edit that did not fit the version seen is never merged.
        assert_eq!(check(&seen, &twice, "nowhere", "x", false), Err(Unmerged::Unfit));
        assert_eq!(check(&twice, &twice, "l5\n", "five\n", false), Err(Unmerged::Unfit));
        // replace_all: the same number of places, each away from the change.
        let seen = "x\na\nb\nc\nx\nd\ne\nf\nx\n";
        assert_eq!(check(seen, "x\nA\nb\nc\nx\nd\ne\nf\nx\n", "x", "y", true), Err(Unmerged::Touched));
        assert_eq!(check(seen, "x\na\nb\nc\nx\nd\ne\nF\nx\n", "x", "y", true), Err(Unmerged::Touched));
        assert_eq!(check(seen, "x\na\nB\nc\nx\nd\ne\nf\nx\n", "x", "y", true), Ok(()));
        assert_eq!(check(seen, "x\na\nb\nc\nx\nd\nE\nf\nx\n", "x", "y", true), Ok(()));
        assert_eq!(
            check(seen, "x\na\nb\nc\nx\nd\nx\nf\nx\n", "x", "y", true),
            Err(Unmerged::Count { seen: 3, now: 4 })
        );
    }

    #[test]
    fn a_match_must_be_the_occurrence_seen() {
        // The only `b` moved: deleted at line 2, added at line 5. Same count, elsewhere.
        let seen = "a\nb\nc\nd\ne\nf\ng\n";
        let now = "a\nc\nd\nb\ne\nf\ng\n";
        assert!(check(seen, now, "b", "B", false).is_err());
        // A diff that places its deletion oddly (after the insertion it pairs with) still
        // counts every line outside the unchanged runs as changed: here the line above the
        // match went and one was added right below it.
        assert_eq!(check("xx\nx\n", "x\nx\ny\nx\n", "x\nx", "Z", false), Err(Unmerged::Touched));
        // Not text, either side.
        assert_eq!(
            super::check(b"a\0\n", b"a\n", &Replacement::new("a", "b", false).unwrap()),
            Err(Unmerged::NotText)
        );
        assert_eq!(
            super::check(b"a\n", b"\xFF\n", &Replacement::new("a", "b", false).unwrap()),
            Err(Unmerged::NotText)
        );
    }

    #[test]
    fn line_endings_and_the_bom_are_not_changes() {
        let seen = "l1\r\nl2\r\nl3\r\nl4\r\nl5\r\n";
        // A CRLF file, changed two lines away: `\n` in the old text matches `\r\n`.
        assert_eq!(check(seen, "L1\r\nl2\r\nl3\r\nl4\r\nl5\r\n", "l3\nl4", "x", false), Ok(()));
        assert_eq!(
            check(seen, "l1\r\nL2\r\nl3\r\nl4\r\nl5\r\n", "l3\nl4", "x", false),
            Err(Unmerged::Touched)
        );
        // The same lines with LF endings now and a BOM: no line changed.
        let now = "\u{FEFF}l1\nl2\nl3\nl4\nl5\n";
        assert_eq!(check(seen, now, "l3", "x", false), Ok(()));
    }
}
