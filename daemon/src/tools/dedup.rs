//! Deduplicated re-reads (`dedupReads`): when an owner already received exactly this text of this
//! version of a file from the `read` tool, the tool answers one short line instead; the next
//! identical read sends the text again, and so does any change of the file (a new version) or
//! of the window. Keyed on a digest of (path, version, the exact text delivered, in its JSON
//! escaped form: the read tool's text is escaped as it is built), which covers the first and last
//! line delivered, whether the output was cut, and every projection setting.

use crate::context::ReadView;
use crate::session::owners::Delivered;

/// The dedup key of a delivered read (`escaped`: its text, JSON-escaped).
fn digest(view: &ReadView, escaped: &[u8]) -> u128 {
    let mut hasher = blake3::Hasher::new();
    for part in [view.display.as_bytes(), view.version.to_string().as_bytes(), escaped] {
        hasher.update(&(part.len() as u64).to_le_bytes());
        hasher.update(part);
    }
    let mut key = [0u8; 16];
    key.copy_from_slice(&hasher.finalize().as_bytes()[..16]);
    u128::from_le_bytes(key)
}

/// The short answer to a repeated read.
pub fn unchanged(view: &ReadView) -> String {
    format!(
        "(Unchanged: you already have this text of {} from line {}. Call read again to get it.)",
        view.display, view.window.start_line
    )
}

/// What the `read` tool answers: `text`, or the short line when `delivered` (dedup on) says
/// this owner already received it and the short line is shorter. Records what was delivered.
pub fn answer(delivered: Option<&Delivered>, view: &ReadView, text: String) -> String {
    let Some(delivered) = delivered else { return text };
    let mut escaped = Vec::with_capacity(text.len());
    crate::json::escape_into(&mut escaped, &text);
    match short_instead(delivered, view, &escaped, text.len()) {
        Some(short) => short,
        None => text,
    }
}

/// [`answer`] for a text already written JSON-escaped (`escaped`; `len` bytes before
/// escaping): the short line to send instead of it, or `None` to send it. Records what was
/// delivered.
pub fn answer_json(
    delivered: Option<&Delivered>,
    view: &ReadView,
    escaped: &[u8],
    len: usize,
) -> Option<String> {
    short_instead(delivered?, view, escaped, len)
}

fn short_instead(delivered: &Delivered, view: &ReadView, escaped: &[u8], len: usize) -> Option<String> {
    let key = digest(view, escaped);
    if delivered.take(key) {
        let short = unchanged(view);
        if short.len() < len {
            return Some(short);
        }
    }
    delivered.record(key);
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::{Version, Window};

    fn view(content: &[u8], start: u64, lines: &[&str]) -> ReadView {
        ReadView {
            display: "src/lib.rs".into(),
            version: Version::of(content),
            window: Window {
                start_line: start,
                lines: lines.iter().collect(),
                truncated: vec![],
                total_lines: 500,
                capped: false,
                oversized: None,
            },
        }
    }

    #[test]
    fn the_short_line() {
        expect_test::expect![
            "(Unchanged: you already have this text of src/lib.rs from line 40. Call read again to get it.)"
        ]
        .assert_eq(&unchanged(&view(b"v1", 40, &[])));
    }

    #[test]
    fn a_text_written_escaped_is_the_same_delivery_as_the_plain_text() {
        let d = Delivered::new(16);
        let text = format!("{}\t\"quoted\"\n", "x".repeat(400));
        let mut escaped = Vec::new();
        crate::json::escape_into(&mut escaped, &text);
        let v1 = view(b"v1", 1, &["a"]);
        assert_eq!(answer_json(Some(&d), &v1, &escaped, text.len()), None, "first read: the text");
        assert_eq!(answer(Some(&d), &v1, text.clone()), unchanged(&v1), "the same text, the other way");
        assert_eq!(answer_json(Some(&d), &v1, &escaped, text.len()), None, "asked again: the text");
        assert_eq!(answer_json(Some(&d), &v1, &escaped, text.len()), Some(unchanged(&v1)));
        assert_eq!(answer_json(None, &v1, &escaped, text.len()), None, "off: always the text");
        assert_eq!(answer_json(Some(&d), &v1, b"ab", 2), None);
        assert_eq!(answer_json(Some(&d), &v1, b"ab", 2), None, "never longer than the text");
    }

    #[test]
    fn short_once_then_the_text_and_never_across_versions_or_windows() {
        let d = Delivered::new(16);
        let long = "x".repeat(400);
        let v1 = view(b"v1", 1, &["a"]);
        assert_eq!(answer(Some(&d), &v1, long.clone()), long, "first read: the text");
        assert_eq!(answer(Some(&d), &v1, long.clone()), unchanged(&v1), "same lines, same version");
        assert_eq!(answer(Some(&d), &v1, long.clone()), long, "asked again: the text");
        assert_eq!(answer(Some(&d), &v1, long.clone()), unchanged(&v1));
        let v2 = view(b"v2", 1, &["a"]);
        assert_eq!(answer(Some(&d), &v2, long.clone()), long, "a new version is sent");
        let other = format!("{long}y");
        assert_eq!(answer(Some(&d), &v2, other.clone()), other, "other lines are sent");
        assert_eq!(answer(None, &v2, long.clone()), long, "off: always the text");
        d.clear();
        assert_eq!(answer(Some(&d), &v2, long.clone()), long, "after a reset: the text");
        assert_eq!(answer(Some(&d), &v2, "short".into()), "short");
        assert_eq!(answer(Some(&d), &v2, "short".into()), "short", "never longer than the text");
    }
}
