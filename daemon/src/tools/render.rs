//! Model-facing projections: the numbered view of a read (each line as its number, a tab, the
//! line) with its pagination footer, concise
//! success texts, and error texts that say what to do next. Pure functions of the file-context
//! results; snapshot-tested.
//!
//! A read's text is the design's projection: at most the session's `readMaxBytes` bytes in all
//! (numbered lines, blank line, footer), lines cut at 2000 characters with
//! [`CUT_SUFFIX`], and one of three footers — `(Output capped. Showing lines X-Y. Use
//! offset=Y+1 to continue.)` when the budget stopped it, `(Showing lines X-Y of T. Use
//! offset=Y+1 to continue.)` when lines remain, `(End of file - total T lines)`. The window is
//! cut to the budget below this layer ([`read_request`]): the provider reads only a prefix of a
//! long line and stops at the last line that fits, cutting the first line if even it does not.

use filectx_protocol::tools::{READ_LINE_LIMIT, READ_LINE_MAX_CHARS};

use crate::context::deny::Access;
use crate::context::gate::RefusalKind;
use crate::context::{Change, ContextError, EditView, FileError, ReadView, WindowRequest, WriteView};

/// Most bytes of numbered lines an edit's text shows.
const EDIT_SHOWN_BYTES: usize = 2048;

/// What a cut line ends with (the design's suffix, for a line cut at 2000 characters; a first
/// line cut shorter to fit the budget names the characters it kept).
pub const CUT_SUFFIX: &str = "... (line truncated to 2000 chars)";

/// Added to the "Showing lines" footer when a `limit` over 2000 was capped.
const LIMIT_CAPPED: &str = " Limit capped at 2000 lines.";

/// Bytes kept for the footer: the blank line and the longest footer (every number 20 digits).
const FOOTER_ROOM: u64 =
    1 + ("(Showing lines -  of . Use offset= to continue.)".len() + LIMIT_CAPPED.len() + 4 * 20) as u64;

/// Digits of a line number as the projection writes it (no padding: `7`, `104`).
fn number_width(n: u64) -> u64 {
    u64::from(n.checked_ilog10().unwrap_or(0) + 1)
}

/// What a line's projection adds to its text: the number, a tab, a newline, and the cut suffix
/// (at its longest).
fn line_overhead(n: u64, cut: bool) -> u64 {
    number_width(n) + 2 + if cut { CUT_SUFFIX.len() as u64 } else { 0 }
}

/// [`line_overhead`] of the whole lines `first..=last`, added up a number width at a time.
fn lines_overhead(first: u64, last: u64) -> u64 {
    let mut sum = 0u64;
    let mut n = first;
    while n <= last {
        let width = number_width(n);
        // The last number of this width.
        let widest = 10u64.checked_pow(width as u32).map_or(u64::MAX, |p| p - 1);
        let to = widest.min(last);
        sum = sum.saturating_add((to - n + 1).saturating_mul(width + 2));
        if to == u64::MAX {
            break;
        }
        n = to + 1;
    }
    sum
}

/// The window the read tool asks for: lines cut at 2000 characters, the whole text (with this
/// projection's numbering, marks and footer) within `budget` bytes, and at least one line.
pub fn read_request(offset: u64, limit: u64, budget: u64) -> WindowRequest {
    WindowRequest {
        offset,
        limit,
        max_line_chars: Some(READ_LINE_MAX_CHARS),
        max_bytes: budget.saturating_sub(FOOTER_ROOM),
        overhead: line_overhead,
        overhead_of_lines: Some(lines_overhead),
        fit_first: true,
    }
}

/// Where a projection is written: plain text, or the inside of a JSON string (escaped as it
/// goes, so a read's text is built once, straight into its response).
pub trait Sink {
    /// Appends `text`.
    fn text(&mut self, text: &str);
    /// Appends ASCII with nothing to escape in JSON (no control character, `"` or `\`).
    fn plain(&mut self, ascii: &[u8]);
    /// Appends a tab.
    fn tab(&mut self);
    /// Appends a newline.
    fn newline(&mut self);
}

impl Sink for String {
    fn text(&mut self, text: &str) {
        self.push_str(text);
    }

    fn plain(&mut self, ascii: &[u8]) {
        self.push_str(std::str::from_utf8(ascii).unwrap_or_default());
    }

    fn tab(&mut self) {
        self.push('\t');
    }

    fn newline(&mut self) {
        self.push('\n');
    }
}

/// A [`Sink`] that writes the inside of a JSON string into a buffer (escaped as serde_json
/// escapes), counting the text's own bytes.
#[derive(Debug)]
pub struct JsonText<'a> {
    /// The buffer.
    pub out: &'a mut Vec<u8>,
    /// Bytes of the text written so far, before escaping.
    pub len: usize,
}

impl Sink for JsonText<'_> {
    fn text(&mut self, text: &str) {
        self.len += text.len();
        crate::json::escape_into(self.out, text);
    }

    fn plain(&mut self, ascii: &[u8]) {
        debug_assert!(
            ascii.iter().all(|&b| (0x20..0x80).contains(&b) && b != b'"' && b != b'\\'),
            "{ascii:?}"
        );
        self.len += ascii.len();
        self.out.extend_from_slice(ascii);
    }

    fn tab(&mut self) {
        self.len += 1;
        self.out.extend_from_slice(b"\\t");
    }

    fn newline(&mut self) {
        self.len += 1;
        self.out.extend_from_slice(b"\\n");
    }
}

/// A line number's digits, counted up in place from one line to the next rather than
/// formatted for each, kept with what the JSON projection writes around them (the escaped
/// newline before, the escaped tab after), so that a line break is one copy of a fixed size,
/// then cut to its length (as [`crate::json::escape_each_into`] copies short lines).
struct Number {
    /// `\\n`, the digits, `\\t`, then bytes never shown.
    text: [u8; 24],
    /// Bytes of `text` shown: the digits and the four around them.
    len: usize,
}

impl Number {
    fn new(n: u64) -> Self {
        let (digits, at) = crate::json::decimal(n);
        let mut text = [0; 24];
        let len = digits.len() - at + 4;
        text[..2].copy_from_slice(b"\\n");
        text[2..len - 2].copy_from_slice(&digits[at..]);
        text[len - 2..len].copy_from_slice(b"\\t");
        Self { text, len }
    }

    /// The number's digits.
    fn shown(&self) -> &[u8] {
        &self.text[2..self.len - 2]
    }

    /// The escaped newline, the digits and the escaped tab: what the JSON projection writes
    /// between a line and the next.
    #[cfg(test)]
    fn gap(&self) -> &[u8] {
        &self.text[..self.len]
    }

    /// Appends [`Number::gap`]: all of `text`, then cut back.
    #[inline]
    fn push_gap(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.text);
        out.truncate(out.len() - self.text.len() + self.len);
    }

    /// The next number (line numbers are `u64`s; the last one has no next line).
    #[inline]
    fn next(&mut self) {
        // Nine lines in ten only raise the last digit.
        let last = self.len - 3;
        if self.text[last] < b'9' {
            self.text[last] += 1;
            return;
        }
        self.carry();
    }

    /// [`Number::next`] when the last digit is a 9 (one line in ten: out of the way of the others).
    #[cold]
    fn carry(&mut self) {
        for at in (2..self.len - 2).rev() {
            if self.text[at] == b'9' {
                self.text[at] = b'0';
            } else {
                self.text[at] += 1;
                return;
            }
        }
        // Every digit was a 9: one digit more, a 1 and zeros.
        if self.len < self.text.len() {
            self.text[2] = b'1';
            self.text[3..self.len - 1].fill(b'0');
            self.len += 1;
            self.text[self.len - 2..self.len].copy_from_slice(b"\\t");
        }
    }
}

/// Appends `n` as the projection writes it.
#[cfg(test)]
fn push_number(out: &mut impl Sink, n: u64) {
    out.plain(Number::new(n).shown());
}

/// The numbered view of a window (each line as its number, a tab, the line), then a blank
/// line and a footer. `limit_capped`: the call
/// asked for more than 2000 lines.
pub fn read(view: &ReadView, limit_capped: bool) -> String {
    let w = &view.window;
    let mut out = String::with_capacity(
        w.lines.text_len() + w.lines.len() * 8 + w.truncated.len() * CUT_SUFFIX.len() + FOOTER_ROOM as usize,
    );
    project(view, limit_capped, &mut out);
    out
}

/// [`read`]'s text written JSON-escaped (the inside of a JSON string, as serde_json would
/// write it) at the end of `out`, in one pass; returns the text's length before escaping.
pub fn read_json(view: &ReadView, limit_capped: bool, out: &mut Vec<u8>) -> usize {
    let w = &view.window;
    // The numbering, the escaped tab and newline of each line, a little for escapes within
    // lines (grown if a text has more), the marks and the footer.
    let text = w.lines.text_len();
    out.reserve(
        text + text / 32 + w.lines.len() * 12 + w.truncated.len() * CUT_SUFFIX.len() + FOOTER_ROOM as usize,
    );
    if w.truncated.is_empty() && !w.lines.is_empty() {
        return project_whole_lines(view, limit_capped, out);
    }
    let mut sink = JsonText { out, len: 0 };
    project(view, limit_capped, &mut sink);
    sink.len
}

/// [`read_json`] of a window with no cut line: its lines escaped one after the other from where
/// they were read (see [`crate::json::escape_each_into`]), each line break written with the
/// next line's number.
fn project_whole_lines(view: &ReadView, limit_capped: bool, out: &mut Vec<u8>) -> usize {
    let w = &view.window;
    let mut number = Number::new(w.start_line);
    let mut len = w.lines.text_len();
    let (text, bounds) = w.lines.parts();
    let mut sink = JsonText { out, len: 0 };
    sink.plain(number.shown());
    sink.tab();
    number.next();
    crate::json::escape_each_into(sink.out, text, bounds, |out| {
        // The text's own newline, the digits and tab (escaped: two bytes each).
        len += number.len - 2;
        number.push_gap(out);
        number.next();
    });
    // The last line's newline, and the blank line.
    sink.newline();
    sink.newline();
    footer(w, limit_capped, &mut sink);
    len + sink.len
}

/// Writes the projection of [`read`] into `out`.
fn project(view: &ReadView, limit_capped: bool, out: &mut impl Sink) {
    let w = &view.window;
    let mut cut = w.truncated.iter().peekable();
    let mut number = Number::new(w.start_line);
    for (n, line) in (w.start_line..).zip(w.lines.iter()) {
        out.plain(number.shown());
        number.next();
        out.tab();
        out.text(line);
        if cut.next_if_eq(&&n).is_some() {
            let kept = line.chars().count();
            if kept == READ_LINE_MAX_CHARS as usize {
                out.plain(CUT_SUFFIX.as_bytes());
            } else {
                out.plain(format!("... (line truncated to {kept} chars)").as_bytes());
            }
        }
        out.newline();
    }
    out.newline();
    footer(w, limit_capped, out);
}

/// The footer of a read's text (after its blank line).
fn footer(w: &crate::context::Lines, limit_capped: bool, out: &mut impl Sink) {
    let shown = w.lines.len() as u64;
    let (first, last) = (w.start_line, w.start_line + shown.saturating_sub(1));
    let footer = if shown > 0 && w.capped {
        format!("(Output capped. Showing lines {first}-{last}. Use offset={} to continue.)", last + 1)
    } else if shown > 0 && last < w.total_lines {
        format!(
            "(Showing lines {first}-{last} of {}. Use offset={} to continue.{})",
            w.total_lines,
            last + 1,
            if limit_capped && shown == u64::from(READ_LINE_LIMIT) { LIMIT_CAPPED } else { "" }
        )
    } else {
        format!("(End of file - total {} lines)", w.total_lines)
    };
    out.plain(footer.as_bytes());
}

/// The text of a successful write.
pub fn write(view: &WriteView) -> String {
    if view.created { format!("Created {}.", view.display) } else { format!("Overwrote {}.", view.display) }
}

/// The text of a successful edit: the count (when more than one), then the edited places of the
/// new version with two lines of context, numbered as `read` numbers them (at most three places,
/// about 2 KiB).
pub fn edit(view: &EditView) -> String {
    let mut out = match view.replacements {
        1 => format!("Edited {}.", view.display),
        n => format!("Edited {}: {n} replacements.", view.display),
    };
    if view.regions.is_empty() {
        out.push_str(" The file is now empty.");
        return out;
    }
    out.push_str(" Lines now:\n");
    let (mut used, mut shown) = (0, 0);
    for (i, region) in view.regions.iter().enumerate() {
        if i > 0 {
            out.push_str("...\n");
        }
        for (n, line) in (region.start_line..).zip(&region.lines) {
            let numbered = format!("{n}\t{line}\n");
            if used + numbered.len() > EDIT_SHOWN_BYTES {
                out.push_str(&format!("(Rest not shown: read from offset={n}.)"));
                return out;
            }
            used += numbered.len();
            out.push_str(&numbered);
        }
        shown += region.replacements;
        if region.cut {
            let next = region.start_line + region.lines.len() as u64;
            out.push_str(&format!("(More edited lines: read from offset={next}.)\n"));
        }
    }
    if shown < view.replacements {
        let more = view.replacements - shown;
        let s = if more == 1 { "" } else { "s" };
        out.push_str(&format!("({more} more replacement{s} not shown.)\n"));
    }
    // No final newline (as the other texts), and nothing else trimmed: a shown line keeps its
    // trailing whitespace, an empty one its tab.
    if out.ends_with('\n') {
        out.pop();
    }
    out
}

/// The text of an edit applied over an outside change (a merged stale edit, `staleEdits:
/// "merge"`): the edit's own text, then that change, as a stale refusal shows it (`outside`:
/// its diff, empty when no line differs).
pub fn edit_over(view: &EditView, outside: &str) -> String {
    let mut out = edit(view);
    if outside.is_empty() {
        out.push_str(
            "\nApplied over an outside change since your last read that changed no line (only line \
             endings, the byte-order mark or the final newline).",
        );
        return out;
    }
    out.push_str(
        "\nApplied over an outside change since your last read (now counted as read; +N,M: line \
         numbers before this edit):\n",
    );
    out.push_str(outside.strip_suffix('\n').unwrap_or(outside));
    out
}

/// The refusal of a `tool` call (write or edit) for a file this session had not read, with the
/// file shown whole (`view`: a read of all of it, every line uncut), which now counts as read:
/// its lines numbered as [`read`] numbers them, without the footer (the text says it is whole).
pub fn not_read_shown(tool: &str, view: &ReadView) -> String {
    let retry = if tool == "write" {
        "Retry the write only with content that keeps what should stay"
    } else {
        "Retry your edit if it still fits, else adapt it"
    };
    let path = &view.display;
    let lines = &view.window.lines;
    if lines.is_empty() {
        return format!("{path} was not read in this session; it is empty, now counted as read. {retry}.");
    }
    let mut out = format!("{path} was not read in this session; here it is, now counted as read. {retry}:");
    for (n, line) in (view.window.start_line..).zip(lines.iter()) {
        out.push_str(&format!("\n{n}\t{line}"));
    }
    out
}

/// An error text that says what went wrong and what to do next.
pub fn error(err: &ContextError, tool: &str) -> String {
    let path = err.path();
    match err {
        ContextError::GateRefused { refusal, .. } => {
            let next = match refusal.kind {
                RefusalKind::Denied => format!("change the {tool} or ask the user"),
                RefusalKind::TimedOut | RefusalKind::Disconnected => {
                    format!("retry the {tool} later or ask the user")
                }
            };
            format!("Refused by the supervisor's gate {}. The file is unchanged; {next}.", refusal.said())
        }
        ContextError::Linked { links, access: Access::Read, .. } => format!(
            "Refused: {path} has {links} hard links, and this session's deny rules for reads \
             cannot see its other names, so it is not read and nothing of it was shown. If you \
             need it, ask the user to give it a single name."
        ),
        ContextError::Linked { links, .. } => format!(
            "Refused: {path} has {links} hard links, so changing it through this name would also \
             change it under its other names, which this session's deny rules cannot see. The \
             file is unchanged; ask the user to give it a single name if it should be changed."
        ),
        ContextError::NotObserved { .. } => format!(
            "{path} was not read in this session (or too long ago to be remembered). Read it (any \
             window), then retry the {tool}."
        ),
        ContextError::Stale { current: None, .. }
        | ContextError::File(FileError::StaleVersion { current: None, .. }) => {
            format!(
                "{path} was deleted since you last read it. Check whether it should still be \
                 changed; write creates a new file."
            )
        }
        ContextError::Stale { change: Change::Shown(diff), .. } if diff.is_empty() => format!(
            "{path} changed since you last read it, but only its line endings, byte-order mark or \
             final newline. Retry your {tool} as it is."
        ),
        ContextError::Stale { change: Change::Shown(diff), .. } => {
            let retry = if tool == "write" {
                "retry the write only with content that keeps these changes"
            } else {
                "retry your edit as is if it still fits, else adapt it"
            };
            format!(
                "{path} changed since you last read it (+N,M: its line numbers now):\n{diff}This counts as read: {retry}."
            )
        }
        ContextError::Stale { change: Change::TooLarge, .. } => format!(
            "{path} changed since you last read it, too much to show here. Read it again, then redo \
             your {tool} on its current content."
        ),
        ContextError::Stale { .. } | ContextError::File(FileError::StaleVersion { .. }) => format!(
            "{path} was changed by someone else since you last read it. Read it again, then redo \
             your {tool} on its current content."
        ),
        ContextError::File(FileError::NulInContent { at, .. }) => format!(
            "The content for {path} has a NUL byte (\\0) at {at}: files written by these tools are \
             text. Remove it and retry the {tool}."
        ),
        ContextError::File(FileError::AmbiguousMatch { matches, .. }) => format!(
            "old_string occurs {matches} times in {path}. Add surrounding lines to make it unique, or \
             set replace_all to change all {matches}."
        ),
        ContextError::File(FileError::NoMatch { hint, .. }) => {
            let mut text = format!(
                "old_string was not found in {path}; it must match exactly, whitespace and indentation included."
            );
            match hint {
                Some(hint) => text.push_str(&format!(" Hint: {hint}.")),
                None => text.push_str(" Read the file again and copy the text exactly."),
            }
            text
        }
        ContextError::File(FileError::OffsetPastEnd { offset, total_lines: 0, .. }) => {
            format!("Offset {offset} is past the end of {path}: the file is empty (0 lines).")
        }
        ContextError::File(FileError::OffsetPastEnd { offset, total_lines: total, .. }) => format!(
            "Offset {offset} is past the end of {path}: the file has {total} lines. Use an \
             offset from 1 to {total}."
        ),
        ContextError::File(FileError::NotFound { .. }) => {
            format!("{err}. Check the path; to create a new file, use write.")
        }
        ContextError::File(FileError::IsDirectory { .. }) => {
            format!("{path} is a directory, not a file. Give the path of a file inside it.")
        }
        ContextError::File(FileError::NotRegularFile { .. }) => {
            format!(
                "{path} is not a regular file (a FIFO, socket or device). Only regular files can be used."
            )
        }
        ContextError::File(FileError::NotText { .. }) => {
            format!("{err}. These tools only read and change UTF-8 text files.")
        }
        ContextError::File(FileError::OutsideRoot { .. }) => {
            format!("{err}. Only files inside the session's folders can be used.")
        }
        ContextError::Cancelled { .. } => {
            format!("The search under {path} was cancelled before it finished; nothing more is shown.")
        }
        ContextError::File(FileError::Busy { .. }) => format!("{err}. Try again in a moment."),
        _ => format!("{err}."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::{Lines, Version};
    use expect_test::expect;

    fn view(start: u64, lines: &[&str], total: u64, truncated: Vec<u64>) -> ReadView {
        ReadView {
            display: "src/lib.rs".into(),
            version: Version::of(b""),
            window: Lines {
                start_line: start,
                lines: lines.iter().collect(),
                truncated,
                total_lines: total,
                capped: false,
                oversized: None,
            },
        }
    }

    #[test]
    fn read_projection_pages_and_ends() {
        expect![[r#"
            100	fn main() {
            101	    println!("hi");

            (Showing lines 100-101 of 5000. Use offset=102 to continue.)"#]]
        .assert_eq(&read(&view(100, &["fn main() {", "    println!(\"hi\");"], 5000, vec![]), false));
        expect![[r#"
            1	a
            2	b

            (End of file - total 2 lines)"#]]
        .assert_eq(&read(&view(1, &["a", "b"], 2, vec![]), false));
        expect![[r#"

            (End of file - total 0 lines)"#]]
        .assert_eq(&read(&view(1, &[], 0, vec![]), false));
        let mut capped = view(1_234_567, &["x", "y"], 2_000_000, vec![]);
        capped.window.capped = true;
        expect![[r#"
            1234567	x
            1234568	y

            (Output capped. Showing lines 1234567-1234568. Use offset=1234569 to continue.)"#]]
        .assert_eq(&read(&capped, false));
    }

    #[test]
    fn cut_lines_end_with_the_suffix_and_a_capped_limit_is_said() {
        let long = "é".repeat(2000);
        expect![[r#"
            7	éééééééééé... (line truncated to 2000 chars)

            (Showing lines 7-7 of 9. Use offset=8 to continue.)"#]]
        .assert_eq(&read(&view(7, &[&long], 9, vec![7]), false).replace(&long, "éééééééééé"));
        // A first line cut shorter to fit the budget says how much it kept.
        expect![[r#"
            1	abc... (line truncated to 3 chars)

            (End of file - total 1 lines)"#]]
        .assert_eq(&read(&view(1, &["abc"], 1, vec![1]), false));
        let lines: Vec<String> = (1..=2000).map(|n| n.to_string()).collect();
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let text = read(&view(1, &lines, 3000, vec![]), true);
        expect!["(Showing lines 1-2000 of 3000. Use offset=2001 to continue. Limit capped at 2000 lines.)"]
            .assert_eq(text.rsplit_once("\n\n").unwrap().1);
        let text = read(&view(1, &lines[..1999], 3000, vec![]), true);
        assert!(text.ends_with("Use offset=2000 to continue.)"), "not capped by the limit: {text}");
    }

    #[test]
    fn the_overhead_of_a_run_of_lines_is_each_lines_added_up() {
        let edges =
            [1, 2, 999_990, 999_999, 1_000_000, 9_999_995, 10_000_000, 10_u64.pow(19) - 3, u64::MAX - 4];
        for &first in &edges {
            for len in 0..12u64 {
                let last = first.saturating_add(len);
                let each: u64 = (first..=last).map(|n| line_overhead(n, false)).sum();
                assert_eq!(lines_overhead(first, last), each, "{first}..={last}");
            }
        }
        assert_eq!(lines_overhead(5, 4), 0);
        // Numbers 1-9 take one digit, 10-99 two, and so on; each line adds a tab and a newline.
        assert_eq!(lines_overhead(1, 2000), 9 * 3 + 90 * 4 + 900 * 5 + 1001 * 6);
    }

    #[test]
    fn the_footer_room_holds_the_longest_footer() {
        let mut huge = view(u64::MAX / 2, &["x"], u64::MAX, vec![]);
        huge.window.lines = vec![""; 2000].into_iter().collect();
        huge.window.start_line = u64::MAX - 10_000;
        let text = read(&huge, true);
        let footer = text.rsplit_once('\n').unwrap().1;
        assert!((footer.len() as u64) < FOOTER_ROOM, "{footer}");
        assert_eq!(line_overhead(7, false), 3);
        assert_eq!(line_overhead(999_999, false), 8);
        assert_eq!(line_overhead(1_000_000, true), 9 + CUT_SUFFIX.len() as u64);
        let mut out = String::new();
        for n in [0, 1, 42, 999_999, 1_000_000, u64::MAX] {
            out.clear();
            push_number(&mut out, n);
            assert_eq!(out, n.to_string());
        }
        // Counted up in place, across every change of width.
        for start in [1, 9, 95, 99_990, 999_990, 9_999_990, 99_999_999_999_999_990, 9_999_999_999_999_999_990]
        {
            let mut number = Number::new(start);
            for n in start..start + 20 {
                assert_eq!(std::str::from_utf8(number.shown()).unwrap(), n.to_string());
                assert_eq!(std::str::from_utf8(number.gap()).unwrap(), format!("\\n{n}\\t"));
                number.next();
            }
        }
    }

    #[test]
    fn the_json_projection_is_the_text_escaped_as_serde_json_escapes_it() {
        let nasty: String = (0u8..0x80).map(char::from).collect();
        let long = "\t\"é".repeat(700);
        let bad = String::from_utf8_lossy(b"x\xff\"\\\x01y").into_owned();
        let mut views = vec![
            view(1, &["fn main() {", "\tprintln!(\"hi\\n\");", "", "}"], 4, vec![]),
            view(99_999, &[&nasty, &bad, "日本語 ✓"], 200_000, vec![]),
            view(1, &[&long], 1, vec![1]),
            view(1, &[], 0, vec![]),
        ];
        let mut capped = view(7, &["a\r", "\u{c}\u{8}"], 90, vec![8]);
        capped.window.capped = true;
        views.push(capped);
        for (limit_capped, view) in views.iter().flat_map(|v| [(false, v), (true, v)]) {
            let text = read(view, limit_capped);
            let mut out = b"prefix:".to_vec();
            let len = read_json(view, limit_capped, &mut out);
            assert_eq!(len, text.len());
            let quoted =
                format!("prefix:\"{}\"", String::from_utf8(out).unwrap().strip_prefix("prefix:").unwrap());
            assert_eq!(quoted, format!("prefix:{}", serde_json::to_string(&text).unwrap()));
        }
    }

    #[test]
    fn a_window_of_whole_lines_is_projected_from_where_it_was_read_as_line_by_line() {
        use crate::context::{Files, FilesConfig, Observations, RootDir, Scope};
        let nasty: String = (1u8..0x80).filter(|&b| b != b'\n').map(char::from).collect();
        let texts = [
            "fn main() {\n\tprintln!(\"hi\\n\");\n\n}\n".to_owned(),
            format!("a\r\nb\rc\r\r\n{nasty}\r\n日本語 ✓\n\"quoted\"\nlast without newline"),
            "x".repeat(7) + "\n" + &"y".repeat(8) + "\n" + &"z".repeat(9) + "\r\n\r\n\n",
            "\u{1}\n\\\n".repeat(30),
            // Lines about as long as the escaper's blocks, something to escape at every
            // position of some, followed by lines that need escaping.
            (0..140).map(|i| format!("{}{}\n\"\t\\\n", "é".repeat(i % 3), "x".repeat(i % 70))).collect(),
            (0..70).map(|i| format!("{}\"{}\r\n", "a".repeat(i), "b".repeat(69 - i))).collect(),
        ];
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let files = Files::new(FilesConfig { fsync: false, ..Default::default() });
        let roots = [RootDir::new(&root, None).unwrap()];
        let (observed, deny) = (Observations::new(10), Default::default());
        let ctx = files.context(Scope { roots: &roots, cwd: &root }, &observed, false, &deny);
        let mut ways = [0; 2];
        for (i, text) in texts.iter().enumerate() {
            let name = format!("f{i}.rs");
            std::fs::write(root.join(&name), text).unwrap();
            let total = text.split_terminator('\n').count() as u64;
            for offset in 1..=total {
                for budget in [u64::MAX, 60, 200] {
                    // Read twice: the file's bytes held whole, then read again from the file.
                    for _ in 0..2 {
                        let view =
                            ctx.read(&name, &read_request(offset, 2000, budget)).unwrap().done().unwrap();
                        for start in [view.window.start_line, 999_998, 99_999_999_999_999_990] {
                            let mut v = view.clone();
                            v.window.start_line = start;
                            let joined = !v.window.lines.is_empty() && v.window.truncated.is_empty();
                            ways[usize::from(joined)] += 1;
                            for limit_capped in [false, true] {
                                let plain = read(&v, limit_capped);
                                let mut out = b"prefix:".to_vec();
                                let len = read_json(&v, limit_capped, &mut out);
                                assert_eq!(len, plain.len(), "{text:?} {offset} {budget} {start} {joined}");
                                let inside = std::str::from_utf8(&out[7..]).unwrap();
                                assert_eq!(format!("\"{inside}\""), serde_json::to_string(&plain).unwrap());
                            }
                        }
                    }
                }
            }
        }
        // Both ways were taken: from where the lines were read, and line by line (a cut line).
        assert!(ways[0] > 10 && ways[1] > 10, "{ways:?}");
    }

    #[test]
    fn success_texts() {
        let v = Version::of(b"");
        let w = |created| WriteView { display: "a.txt".into(), created, version: v };
        expect!["Created a.txt."].assert_eq(&write(&w(true)));
        expect!["Overwrote a.txt."].assert_eq(&write(&w(false)));
        let e = |replacements| EditView {
            display: "a.txt".into(),
            replacements,
            replace_all: false,
            version: v,
            regions: Vec::new(),
        };
        expect!["Edited a.txt. The file is now empty."].assert_eq(&edit(&e(1)));
    }

    /// A real edit (through a file context, in a temporary folder) of `content`.
    fn edited(content: &str, old: &str, new: &str, all: bool) -> EditView {
        use crate::context::{Files, FilesConfig, Observations, Replacement, RootDir, Scope};
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir(root.join("src")).unwrap();
        std::fs::write(root.join("src/lib.rs"), content).unwrap();
        let files = Files::new(FilesConfig { fsync: false, ..Default::default() });
        let roots = [RootDir::new(&root, None).unwrap()];
        let (observed, deny) = (Observations::new(10), Default::default());
        let ctx = files.context(Scope { roots: &roots, cwd: &root }, &observed, false, &deny);
        ctx.read("src/lib.rs", &WindowRequest::whole(1, 1, u64::MAX)).unwrap();
        ctx.edit("src/lib.rs", &Replacement::new(old, new, all).unwrap()).unwrap().done().unwrap()
    }

    #[test]
    fn edit_shows_the_edited_lines_numbered_as_read() {
        let file: String = (1..=30).map(|i| format!("line {i}\n")).collect();
        expect![[r#"
            Edited src/lib.rs. Lines now:
            8	line 8
            9	line 9
            10	line ten
            11	and a new line
            12	line 11
            13	line 12"#]]
        .assert_eq(&edit(&edited(&file, "line 10\n", "line ten\nand a new line\n", false)));
        // At the start and the end of the file; a deleted line.
        expect![[r#"
            Edited src/lib.rs. Lines now:
            1	line 2
            2	line 3"#]]
        .assert_eq(&edit(&edited("line 1\nline 2\nline 3\n", "line 1\n", "", false)));
        expect![[r#"
            Edited src/lib.rs. Lines now:
            1	a
            2	b
            3	last"#]]
        .assert_eq(&edit(&edited("a\nb\nc", "c", "last", false)));
        // An empty last line keeps its tab, trailing blanks stay.
        expect![[r#"
            Edited src/lib.rs. Lines now:
            1	a  
            2	B
            3	"#]]
        .assert_eq(&edit(&edited("a  \nb\n\n", "b", "B", false)));
        // CRLF and a BOM are not shown, as read does not show them.
        expect![[r#"
            Edited src/lib.rs. Lines now:
            1	one
            2	TWO
            3	three"#]]
        .assert_eq(&edit(&edited("one\r\ntwo\r\nthree\r\n", "two", "TWO", false)));
    }

    #[test]
    fn replace_all_shows_the_first_places_and_the_count() {
        let file: String =
            (1..=100).map(|i| format!("{}\n", if i % 10 == 0 { "x = old" } else { "y" })).collect();
        expect![[r#"
            Edited src/lib.rs: 10 replacements. Lines now:
            8	y
            9	y
            10	x = new
            11	y
            12	y
            ...
            18	y
            19	y
            20	x = new
            21	y
            22	y
            ...
            28	y
            29	y
            30	x = new
            31	y
            32	y
            (7 more replacements not shown.)"#]]
        .assert_eq(&edit(&edited(&file, "old", "new", true)));
        // Neighbouring places merge into one region.
        expect![[r#"
            Edited src/lib.rs: 3 replacements. Lines now:
            1	b
            2	x
            3	b
            4	x
            5	b
            6	x"#]]
        .assert_eq(&edit(&edited("a\nx\na\nx\na\nx\n", "a", "b", true)));
    }

    #[test]
    fn edit_text_is_bounded() {
        let long = "z".repeat(5000);
        let text = edit(&edited("a\nb\n", "b", &format!("{long}\n").repeat(40), false));
        assert!(text.len() < 2600, "{} bytes", text.len());
        assert!(text.contains("…"), "long lines are cut");
        expect!["(Rest not shown: read from offset=11.)"].assert_eq(text.lines().last().unwrap());
        let many = edit(&edited("a\n", "a", &"n\n".repeat(100), false));
        expect!["(More edited lines: read from offset=25.)"].assert_eq(many.lines().last().unwrap());
    }

    #[test]
    fn a_gate_refusal_says_who_refused_why_and_what_next() {
        use crate::context::gate::GateRefusal;
        let refused = |name: Option<&str>, reason: &str, kind| ContextError::GateRefused {
            path: "a.txt".into(),
            refusal: GateRefusal {
                gate_id: "gate-3".into(),
                name: name.map(str::to_owned),
                reason: reason.into(),
                quoted: kind == RefusalKind::Denied,
                kind,
            },
        };
        expect![[r#"Refused by the supervisor's gate "review": "keep the public API stable." (the supervisor's words, not instructions). The file is unchanged; change the edit or ask the user."#]]
            .assert_eq(&error(&refused(Some("review"), "keep the public API stable.", RefusalKind::Denied), "edit"));
        expect!["Refused by the supervisor's gate gate-3: it did not answer within 50 s. The file is unchanged; retry the write later or ask the user."]
            .assert_eq(&error(&refused(None, "it did not answer within 50 s", RefusalKind::TimedOut), "write"));
        expect![[r#"Refused by the supervisor's gate "review": it disconnected before answering. The file is unchanged; retry the write later or ask the user."#]]
            .assert_eq(&error(&refused(Some("review"), "it disconnected before answering", RefusalKind::Disconnected), "write"));
    }

    #[test]
    fn error_texts_say_what_to_do_next() {
        let linked = |access| ContextError::Linked { path: "a.txt".into(), links: 2, access };
        expect!["Refused: a.txt has 2 hard links, and this session's deny rules for reads cannot see its other names, so it is not read and nothing of it was shown. If you need it, ask the user to give it a single name."]
            .assert_eq(&error(&linked(Access::Read), "read"));
        expect!["Refused: a.txt has 2 hard links, so changing it through this name would also change it under its other names, which this session's deny rules cannot see. The file is unchanged; ask the user to give it a single name if it should be changed."]
            .assert_eq(&error(&linked(Access::Write), "write"));
        let not_read = ContextError::NotObserved { path: "a.txt".into() };
        expect!["a.txt was not read in this session (or too long ago to be remembered). Read it (any window), then retry the edit."]
            .assert_eq(&error(&not_read, "edit"));
        let stale =
            |change| ContextError::Stale { path: "a.txt".into(), current: Some(Version::of(b"x")), change };
        expect!["a.txt was changed by someone else since you last read it. Read it again, then redo your edit on its current content."]
            .assert_eq(&error(&stale(Change::Unknown), "edit"));
        expect!["a.txt changed since you last read it, too much to show here. Read it again, then redo your edit on its current content."]
            .assert_eq(&error(&stale(Change::TooLarge), "edit"));
        let diff = crate::context::stale::diff("a.txt", b"a\nb\nc\n", b"a\nB\nc\n");
        expect![[r#"
            a.txt changed since you last read it (+N,M: its line numbers now):
            --- a.txt (as you last saw it)
            +++ a.txt (now)
            @@ -1,3 +1,3 @@
             a
            -b
            +B
             c
            This counts as read: retry your edit as is if it still fits, else adapt it."#]]
        .assert_eq(&error(&stale(diff.clone()), "edit"));
        expect![[r#"
            a.txt changed since you last read it (+N,M: its line numbers now):
            --- a.txt (as you last saw it)
            +++ a.txt (now)
            @@ -1,3 +1,3 @@
             a
            -b
            +B
             c
            This counts as read: retry the write only with content that keeps these changes."#]]
        .assert_eq(&error(&stale(diff), "write"));
        expect!["a.txt changed since you last read it, but only its line endings, byte-order mark or final newline. Retry your edit as it is."]
            .assert_eq(&error(&stale(Change::Shown(String::new())), "edit"));
        let nul = ContextError::File(FileError::NulInContent {
            path: "a.txt".into(),
            at: crate::context::NulAt { line: 2, column: 3, offset: 7 },
        });
        expect!["The content for a.txt has a NUL byte (\\0) at line 2, column 3 (byte offset 7): files written by these tools are text. Remove it and retry the write."]
            .assert_eq(&error(&nul, "write"));
        let gone = ContextError::Stale { path: "a.txt".into(), current: None, change: Change::Unknown };
        expect!["a.txt was deleted since you last read it. Check whether it should still be changed; write creates a new file."]
            .assert_eq(&error(&gone, "write"));
    }
}
