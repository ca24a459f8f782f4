//! The pure text transformation of an edit: literal matching that respects the file's line
//! endings, the match-count rules, and hints for near misses. No IO.

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

/// Collapses every run of whitespace to one space, for near-miss detection.
fn squash(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Removes `cat -n` style prefixes (spaces, digits, a tab) that models copy from read output.
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

/// Replaces `old` by `new` in `content` (which has no BOM). In a CRLF file, `\n` in `old` and
/// `new` stands for `\r\n`, so the file keeps its endings. Returns the new text and the number
/// of replacements.
pub fn apply(content: &str, edit: &Replacement<'_>) -> Result<(String, u64), Miss> {
    let (old, new, replace_all) = (edit.old, edit.new, edit.all);
    let (old, new) = if is_crlf(content) {
        (std::borrow::Cow::Owned(to_crlf(old)), std::borrow::Cow::Owned(to_crlf(new)))
    } else {
        (std::borrow::Cow::Borrowed(old), std::borrow::Cow::Borrowed(new))
    };
    // One pass finds every (non-overlapping) occurrence; the new text is built from them.
    let hits: Vec<usize> = memchr::memmem::find_iter(content.as_bytes(), old.as_bytes()).collect();
    match hits.len() {
        0 => return Err(Miss::NoMatch { hint: hint(content, &old) }),
        1 => {}
        _ if replace_all => {}
        n => return Err(Miss::Ambiguous(n as u64)),
    }
    let mut out = String::with_capacity(content.len() - hits.len() * old.len() + hits.len() * new.len());
    let mut from = 0;
    for &at in &hits {
        out.push_str(&content[from..at]);
        out.push_str(&new);
        from = at + old.len();
    }
    out.push_str(&content[from..]);
    Ok((out, hits.len() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(content: &str, old: &str, new: &str, all: bool) -> Result<(String, u64), Miss> {
        super::apply(content, &Replacement::new(old, new, all).expect("a valid edit"))
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
}
