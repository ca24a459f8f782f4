//! The fake's "type checker": the diagnostics of every open document, from the `ERROR`/`WARN`
//! markers of its lines and the `DEF`/`USE` names across all of them (main.rs gives the rules).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

/// The diagnostics of each document of `docs` (URI → text), in line order, as LSP `Diagnostic`s.
/// With `control_bytes`, each message is wrapped as [`decorate`] says.
pub fn diagnostics<'a>(
    docs: impl IntoIterator<Item = (&'a str, &'a str)> + Clone,
    control_bytes: bool,
) -> BTreeMap<String, Vec<Value>> {
    let defined: BTreeSet<&str> = docs
        .clone()
        .into_iter()
        .flat_map(|(_, text)| lines(text))
        .filter_map(|line| word(line, "DEF"))
        .map(|w| w.name)
        .collect();
    let mut all = BTreeMap::new();
    for (uri, text) in docs {
        let mut found = Vec::new();
        for (number, line) in lines(text).enumerate() {
            if let Some(marker) = marker(line) {
                found.push(diagnostic(
                    line,
                    number,
                    marker.at,
                    marker.severity,
                    marker.code,
                    marker.message,
                    control_bytes,
                ));
            }
            if let Some(used) = word(line, "USE")
                && !defined.contains(used.name)
            {
                let message = format!("unknown name '{}'", used.name);
                found.push(diagnostic(line, number, used.at, 1, Some("E-USE"), &message, control_bytes));
            }
        }
        all.insert(uri.to_owned(), found);
    }
    all
}

/// One diagnostic of source `fake` from byte `at` of `line` (line `number`) to its end.
fn diagnostic(
    line: &str,
    number: usize,
    at: usize,
    severity: u8,
    code: Option<&str>,
    message: &str,
    control_bytes: bool,
) -> Value {
    let start = utf16_len(&line[..at]);
    let end = utf16_len(line);
    let message = if control_bytes { decorate(message) } else { message.to_owned() };
    let mut diagnostic = json!({
        "range": {"start": {"line": number, "character": start}, "end": {"line": number, "character": end}},
        "severity": severity,
        "source": "fake",
        "message": message,
    });
    if let Some(code) = code {
        diagnostic["code"] = json!(code);
    }
    diagnostic
}

/// `message` wrapped in ESC, CR, U+202E (RIGHT-TO-LEFT OVERRIDE) and BEL, for `--control-bytes`.
pub fn decorate(message: &str) -> String {
    format!("\x1b[31m{message}\r\u{202E}\x07")
}

/// The lines of `text` without their ends (`\n`, `\r\n` or `\r`), as LSP counts them.
fn lines(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = Some(text);
    std::iter::from_fn(move || {
        let text = rest?;
        match text.find(['\n', '\r']) {
            None => {
                rest = None;
                Some(text)
            }
            Some(end) => {
                let skip = if text[end..].starts_with("\r\n") { 2 } else { 1 };
                rest = Some(&text[end + skip..]);
                Some(&text[..end])
            }
        }
    })
}

/// The length of `text` in UTF-16 units.
fn utf16_len(text: &str) -> usize {
    text.chars().map(char::len_utf16).sum()
}

/// An `ERROR`/`WARN` marker found in a line.
struct Marker<'a> {
    at: usize,
    severity: u8,
    code: Option<&'a str>,
    message: &'a str,
}

/// The leftmost well-formed `ERROR[CODE]: MESSAGE` / `ERROR: MESSAGE` / `WARN…` of `line`.
fn marker(line: &str) -> Option<Marker<'_>> {
    let mut best: Option<Marker<'_>> = None;
    for (keyword, severity) in [("ERROR", 1), ("WARN", 2)] {
        for (at, _) in line.match_indices(keyword) {
            if best.as_ref().is_some_and(|b| b.at < at) {
                break;
            }
            let mut rest = &line[at + keyword.len()..];
            let mut code = None;
            if let Some(bracketed) = rest.strip_prefix('[') {
                let Some(close) = bracketed.find(']') else { continue };
                code = Some(&bracketed[..close]).filter(|c| !c.is_empty());
                if code.is_none() {
                    continue;
                }
                rest = &bracketed[close + 1..];
            }
            let Some(message) = rest.strip_prefix(':') else { continue };
            best = Some(Marker { at, severity, code, message: message.trim() });
            break;
        }
    }
    best
}

/// A `DEF NAME` or `USE NAME` found in a line.
struct Word<'a> {
    at: usize,
    name: &'a str,
}

/// The leftmost `KEYWORD NAME` of `line`: the keyword not after a letter, digit or `_`, then
/// blanks, then NAME, a run of non-blank characters.
fn word<'a>(line: &'a str, keyword: &str) -> Option<Word<'a>> {
    line.match_indices(keyword).find_map(|(at, _)| {
        let before = line[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            return None;
        }
        let after = &line[at + keyword.len()..];
        let name = after.trim_start_matches([' ', '\t']);
        if name.len() == after.len() {
            return None;
        }
        let name = &name[..name.find(char::is_whitespace).unwrap_or(name.len())];
        (!name.is_empty()).then_some(Word { at, name })
    })
}
