//! The read tool's text: each line as its number, a tab, the line, then a blank line and the
//! pagination footer, as plain text or written JSON-escaped straight into a response; and the
//! window a read asks for so that this text fits the session's budget.

use filectx_protocol::tools::{READ_LINE_LIMIT, READ_LINE_MAX_CHARS};

use crate::context::{ReadView, WindowRequest};

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

/// Trims `window` so that its text, escaped as JSON (a session's `jsonBudget`), fits `budget`
/// bytes as the window request fitted the text unescaped: the lines that no longer fit are
/// dropped (the footer then says the output was capped and where to go on), and a first line
/// alone over the budget is cut to fit, its characters kept named by the cut mark.
pub fn fit_json(window: &mut crate::context::Window, budget: u64) {
    let room = budget.saturating_sub(FOOTER_ROOM);
    let mut used = 0u64;
    let mut keep = window.lines.len();
    let mut first_cut = None;
    for (i, line) in window.lines.iter().enumerate() {
        let n = window.start_line + i as u64;
        let cut = window.truncated.contains(&n);
        // The number, the tab and the newline (each escaped: 2 bytes), the cut mark.
        let overhead = number_width(n) + 4 + if cut { CUT_SUFFIX.len() as u64 + 2 } else { 0 };
        let cost = crate::json::escaped_len(line) as u64 + overhead;
        if used + cost <= room {
            used += cost;
            continue;
        }
        keep = i;
        if i == 0 {
            // The longest prefix whose escape fits beside its number and mark.
            let mut fits = room.saturating_sub(number_width(n) + 4 + CUT_SUFFIX.len() as u64 + 2);
            let mut end = 0;
            for (at, c) in line.char_indices() {
                let mut buf = [0u8; 4];
                let cost = crate::json::escaped_len(c.encode_utf8(&mut buf)) as u64;
                if cost > fits {
                    break;
                }
                fits -= cost;
                end = at + c.len_utf8();
            }
            first_cut = Some(end.max(line.chars().next().map_or(0, char::len_utf8)));
            keep = 1;
        }
        break;
    }
    if keep == window.lines.len() && first_cut.is_none() {
        return;
    }
    window.lines.truncate(keep);
    if let Some(len) = first_cut {
        window.lines.shorten(0, len);
        if !window.truncated.contains(&window.start_line) {
            window.truncated.insert(0, window.start_line);
        }
    }
    window.truncated.retain(|&n| n < window.start_line + keep as u64);
    window.capped = true;
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
fn footer(w: &crate::context::Window, limit_capped: bool, out: &mut impl Sink) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::{Version, Window};
    use expect_test::expect;

    fn view(start: u64, lines: &[&str], total: u64, truncated: Vec<u64>) -> ReadView {
        ReadView {
            display: "src/lib.rs".into(),
            version: Version::of(b""),
            window: Window {
                start_line: start,
                lines: lines.iter().collect(),
                truncated,
                total_lines: total,
                capped: false,
                oversized: None,
            },
        }
    }

    /// Under a JSON budget, the escaped text fits the budget: lines full of control characters
    /// (six bytes each in JSON) are dropped past it, a first line alone over it is cut, and the
    /// footer says where to go on; plain text keeps every line that fitted.
    #[test]
    fn a_json_budget_counts_the_escapes() {
        let budget = 4096u64;
        let noisy = "\u{1}".repeat(100);
        let lines: Vec<&str> = (0..40).map(|_| noisy.as_str()).collect();
        let mut v = view(7, &lines, 100, vec![]);
        fit_json(&mut v.window, budget);
        let mut out = Vec::new();
        read_json(&v, false, &mut out);
        assert!(out.len() as u64 <= budget, "{} escaped bytes", out.len());
        assert!(v.window.lines.len() >= 5, "{} lines", v.window.lines.len());
        let text = read(&v, false);
        let last = 7 + v.window.lines.len() - 1;
        assert!(
            text.ends_with(&format!(
                "(Output capped. Showing lines 7-{last}. Use offset={} to continue.)",
                last + 1
            )),
            "{text}"
        );

        let huge = "\u{1}".repeat(2000);
        let mut v = view(1, &[huge.as_str(), "next"], 2, vec![]);
        fit_json(&mut v.window, budget);
        let mut out = Vec::new();
        read_json(&v, false, &mut out);
        assert!(out.len() as u64 <= budget, "{} escaped bytes", out.len());
        assert_eq!((v.window.lines.len(), v.window.truncated.clone()), (1, vec![1]));
        let text = read(&v, false);
        assert!(
            text.contains("... (line truncated to") && text.contains("Use offset=2 to continue."),
            "{text}"
        );

        let plain: Vec<String> = (0..20).map(|n| format!("let x{n} = {n};")).collect();
        let plain: Vec<&str> = plain.iter().map(String::as_str).collect();
        let mut v = view(1, &plain, 20, vec![]);
        fit_json(&mut v.window, budget);
        assert_eq!(v.window.lines.len(), 20);
        assert!(!v.window.capped);
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
        use crate::context::{Files, Observations, ProviderConfig, RootDir, Scope};
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
        let files = Files::new(ProviderConfig { fsync: false, ..Default::default() });
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
                        let view = ctx
                            .read(&name, &read_request(offset, 2000, budget), crate::context::How::POOL)
                            .unwrap()
                            .done()
                            .unwrap();
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
}
