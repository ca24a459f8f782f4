//! Agent-controlled text made safe to show on a terminal: file names, client names, owners,
//! diffs, file lines and reasons may hold characters a terminal acts on instead of showing —
//! `\r` and cursor moves that rewrite what is on the screen, OSC sequences that set its title,
//! BEL, C1 controls, and bidirectional overrides that reorder a line — so that a person could be
//! shown one thing and approve another. Every function here shows such characters as visible
//! escapes instead: C0 controls as `\r`, `\n`, `\t` or `\xNN` (`\x1b`, `\x07`), DEL, C1
//! (U+0080–U+009F), the bidi controls (U+200E, U+200F, U+061C, U+202A–U+202E, U+2066–U+2069)
//! and the line and paragraph separators (U+2028, U+2029) as `\u{…}`. Everything else, the
//! backslash included, is shown as it is.

use std::borrow::Cow;

/// Whether `c` is shown as an escape: a control character (C0, DEL, C1), a bidirectional
/// control, or a line or paragraph separator.
pub fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{200e}' | '\u{200f}' | '\u{061c}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{2028}' | '\u{2029}'
        )
}

/// A one-line field (a path, a client name, an owner, a gate's name): every character that
/// [`needs_escape`], tab and newline included, as an escape. Borrowed when nothing needed it.
pub fn escape_field(text: &str) -> Cow<'_, str> {
    escape(text, needs_escape)
}

/// One line of content (a file's line, a diff line): as [`escape_field`], but a tab is kept (it
/// moves the cursor only forward, and code is full of them). Borrowed when nothing needed it, so
/// `matches!(escape_line(l), Cow::Owned(_))` says whether the line held anything hidden.
pub fn escape_line(line: &str) -> Cow<'_, str> {
    escape(line, |c| c != '\t' && needs_escape(c))
}

/// Lines of text (a tool's answer, an error message): each `\n` kept as a line end, each line
/// as [`escape_line`] shows it (so a `\r` anywhere is shown, never obeyed).
pub fn escape_text(text: &str) -> Cow<'_, str> {
    if !text.chars().any(|c| c != '\t' && c != '\n' && needs_escape(c)) {
        return Cow::Borrowed(text);
    }
    let lines: Vec<Cow<'_, str>> = text.split('\n').map(escape_line).collect();
    Cow::Owned(lines.join("\n"))
}

/// Serialized JSON with the characters a terminal acts on that serde_json leaves raw (DEL, C1,
/// the bidi controls, U+2028, U+2029; it escapes C0 itself) written as JSON `\u` escapes (CSI
/// as `\u009b`): the same JSON value, safe to print. They can only stand inside strings, where
/// the escape means the same character.
pub fn escape_json(json: &str) -> Cow<'_, str> {
    // C0 stays: serde_json escapes it inside strings, and outside them it is whitespace.
    let raw = |c: char| u32::from(c) >= 0x7f && needs_escape(c);
    if !json.chars().any(raw) {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if raw(c) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

fn escape(text: &str, shown_escaped: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !text.chars().any(&shown_escaped) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if !shown_escaped(c) {
            out.push(c);
            continue;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\x{:02x}", u32::from(c))),
            c => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_terminal_acts_on_is_shown_escaped() {
        let attack = "ok\r\u{1b}[2K\u{1b}[1Aos.system('x')\u{1b}]0;title\u{7}\u{7f}\u{9b}31m\u{202e}gnp\u{2066}\u{2028}";
        let shown =
            r"ok\r\x1b[2K\x1b[1Aos.system('x')\x1b]0;title\x07\u{7f}\u{9b}31m\u{202e}gnp\u{2066}\u{2028}";
        assert_eq!(escape_field(attack), shown);
        assert_eq!(escape_line(attack), shown);
        assert_eq!(escape_field("a\tb\nc"), r"a\tb\nc");
        assert_eq!(escape_line("a\tb\nc"), "a\tb\\nc");
        assert_eq!(escape_text("one\ttab\ntwo\r\x1b[2K\n"), "one\ttab\ntwo\\r\\x1b[2K\n");
        assert!(!escape_text(attack).chars().any(|c| c != '\t' && c != '\n' && needs_escape(c)));
    }

    #[test]
    fn plain_text_is_borrowed_untouched() {
        for plain in ["src/main.rs", "naïve — ünïcode 日本 \\x1b literal", "", "tab\there"] {
            assert!(matches!(escape_line(plain), Cow::Borrowed(_)), "{plain}");
            assert!(matches!(escape_text(plain), Cow::Borrowed(_)), "{plain}");
        }
        assert!(matches!(escape_field("tab\there"), Cow::Owned(_)));
        assert!(matches!(escape_json(r#"{"a":"b"}"#), Cow::Borrowed(_)));
    }

    #[test]
    fn json_stays_the_same_value() -> Result<(), serde_json::Error> {
        let value = serde_json::json!({"path": "n\u{1b}]0;x\u{7}\u{9b}\u{202e}\u{2028}.txt", "ok": "é"});
        let text = serde_json::to_string_pretty(&value)?;
        let safe = escape_json(&text);
        assert!(!safe.chars().any(|c| c != '\n' && needs_escape(c)), "{safe}");
        assert!(safe.contains(r"\u202e") && safe.contains(r"\u009b") && safe.contains('é'), "{safe}");
        assert_eq!(serde_json::from_str::<serde_json::Value>(&safe)?, value);
        Ok(())
    }
}
