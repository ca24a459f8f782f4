//! The `grep` tool: its arguments made a query ([`crate::search::GrepQuery`]), searched by the
//! file context, and what it finds made an answer in its output mode (paths, counts, or
//! matching lines with their context, shown as `read` shows lines) within the session's
//! budget, paged by `offset` and `head_limit`, with footers saying what was left out.

use filectx_protocol::tools::READ_LINE_MAX_CHARS;

use super::answer::{FOOTER_ROOM, SearchError, listing_timed_out};
use crate::context::{FileContext, GrepEnd, Grepped};
use crate::search::{
    Clock, GrepMode, GrepOut, GrepQuery, GrepSpec, RegexLimits, SEARCH_WHOLE_MAX_BYTES, SearchLimits,
};
use crate::tools::render::CUT_SUFFIX;

/// What an answer in `mode` counts its entries in.
fn unit(mode: GrepMode) -> &'static str {
    match mode {
        GrepMode::Content => "lines",
        GrepMode::FilesWithMatches | GrepMode::Count => "files",
    }
}

/// A grep request, validated.
#[derive(Debug, Clone)]
pub struct GrepRequest<'a> {
    /// What to search for, in which files, and what to show.
    pub spec: GrepSpec<'a>,
    /// The file or folder searched (default: the cwd).
    pub path: Option<&'a str>,
    /// Most entries shown.
    pub head_limit: Option<u64>,
    /// Entries skipped first.
    pub offset: u64,
    /// The session's output budget in bytes.
    pub budget: u64,
    /// Whether the budget counts the text as JSON escapes it (the session's `jsonBudget`).
    pub escaped: bool,
}

fn budget_text(budget: u64) -> String {
    if budget.is_multiple_of(1024) { format!("{} KiB", budget / 1024) } else { format!("{budget} bytes") }
}

/// The text of one line as shown: no line ending, no BOM, lossy UTF-8, cut at 2000 chars.
fn line_text(bytes: &[u8], first: bool) -> String {
    let mut bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    if first {
        bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    }
    let text = String::from_utf8_lossy(bytes);
    let max = READ_LINE_MAX_CHARS as usize;
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}{CUT_SUFFIX}", &text[..cut]),
        None => text.into_owned(),
    }
}

/// The answer being built: entries shown within the budget, skipped by `offset`, stopped by
/// `head_limit`, or counted as hidden past the budget.
#[derive(Debug, Clone, Default)]
struct Out {
    text: String,
    room: usize,
    /// Bytes of the budget the text takes: its bytes, or as JSON escapes it.
    used: usize,
    /// Whether the budget counts the text as JSON escapes it.
    escaped: bool,
    offset: u64,
    head: Option<u64>,
    seen: u64,
    shown: u64,
    hidden: u64,
    hidden_files: u64,
    head_reached: bool,
    capped: bool,
    pending_break: bool,
    /// The current file: whether an entry of it was shown, or hidden.
    file_shown: bool,
    file_hidden: bool,
}

impl Out {
    /// Adds one entry; false once `head_limit` is reached (stop searching).
    fn entry(&mut self, line: &str) -> bool {
        self.entry_under(None, line)
    }

    /// Adds one entry, after `heading` (a line of its own) when it is the first of its file
    /// shown; false once `head_limit` is reached (stop searching).
    fn entry_under(&mut self, heading: Option<&str>, line: &str) -> bool {
        self.seen += 1;
        if self.seen <= self.offset {
            return true;
        }
        if self.head.is_some_and(|h| self.shown >= h) {
            self.head_reached = true;
            return false;
        }
        let heading = heading.filter(|_| !self.file_shown);
        let separator = if self.pending_break && self.file_shown { self.cost("--") } else { 0 };
        let heading_len = heading.map_or(0, |h| self.cost(h));
        let mut cost = separator + heading_len + self.cost(line);
        // The first entry shown is cut to fit rather than hidden: every page shows something,
        // so paging on with its offset always gets past a line longer than the budget.
        let cut;
        let mut line = line;
        if self.shown == 0 && !self.capped && self.used + cost > self.room {
            let room = self.room.saturating_sub(self.used + separator + heading_len);
            cut = self.cut_to(line, room);
            line = &cut;
            cost = separator + heading_len + self.cost(line);
        }
        if self.capped || self.used + cost > self.room {
            self.capped = true;
            self.hidden += 1;
            self.file_hidden = true;
            return true;
        }
        if separator > 0 {
            self.text.push_str("--\n");
        }
        if let Some(heading) = heading {
            self.text.push_str(heading);
            self.text.push('\n');
        }
        self.pending_break = false;
        self.text.push_str(line);
        self.text.push('\n');
        self.used += cost;
        self.shown += 1;
        self.file_shown = true;
        true
    }

    /// The longest start of `line` that, with a mark saying how many characters were kept,
    /// takes at most `room` of the budget (at least one character).
    fn cut_to(&self, line: &str, room: usize) -> String {
        let mark = |kept: usize| format!("... (line truncated to {kept} chars)");
        let mut left = room.saturating_sub(self.cost(&mark(line.chars().count())));
        let (mut end, mut kept) = (0, 0);
        for (at, c) in line.char_indices() {
            let mut buf = [0u8; 4];
            let one = c.encode_utf8(&mut buf);
            let cost = if self.escaped { crate::json::escaped_len(one) } else { one.len() };
            if cost > left && kept > 0 {
                break;
            }
            left = left.saturating_sub(cost);
            end = at + c.len_utf8();
            kept += 1;
        }
        format!("{}{}", &line[..end], mark(kept))
    }

    /// What a line of the answer (`text` and its newline) takes of the budget.
    fn cost(&self, text: &str) -> usize {
        if self.escaped { crate::json::escaped_len(text) + 2 } else { text.len() + 1 }
    }

    fn start_file(&mut self) {
        self.file_shown = false;
        self.file_hidden = false;
    }

    fn end_file(&mut self) {
        if self.file_hidden {
            self.hidden_files += 1;
        }
    }
}

/// `grep`: a regex search of the files under the request's path, within `limits`.
pub fn grep(
    ctx: &FileContext<'_>,
    req: &GrepRequest<'_>,
    limits: &SearchLimits<'_>,
) -> Result<String, SearchError> {
    let query = GrepQuery::new(&req.spec, RegexLimits::of(limits.regex_bytes))?;
    let clock = Clock::new(limits);
    let room = usize::try_from(req.budget).unwrap_or(usize::MAX).saturating_sub(FOOTER_ROOM);
    let out = Out { room, escaped: req.escaped, offset: req.offset, head: req.head_limit, ..Out::default() };
    let mut text = GrepText { out, mode: req.spec.mode, mark: None };
    match ctx.grep(&query, req.path, &clock, &mut text)? {
        Grepped::ListingTimedOut { path } => Ok(listing_timed_out(&clock, &path)),
        Grepped::Searched(end) => Ok(finish(text.out, req, &end, &clock.limit_text())),
    }
}

/// The answer being built, as the file context feeds it a grep's finds.
struct GrepText {
    out: Out,
    mode: GrepMode,
    /// Where the text and counters stood before the lines of the file being shown.
    mark: Option<(usize, Out)>,
}

impl GrepOut for GrepText {
    fn file(&mut self, display: &str, count: u64) -> bool {
        let out = &mut self.out;
        out.start_file();
        let go_on = match self.mode {
            GrepMode::Count => out.entry(&format!("{display}:{count}")),
            GrepMode::FilesWithMatches | GrepMode::Content => out.entry(display),
        };
        if go_on {
            out.end_file();
        }
        go_on
    }

    fn start_lines(&mut self) {
        // Counters only (the text is cut back to its length): cheap per file.
        let text = std::mem::take(&mut self.out.text);
        self.mark = Some((text.len(), self.out.clone()));
        self.out.text = text;
        self.out.start_file();
        // A file's lines follow its path: no break before its first group.
        self.out.pending_break = false;
    }

    fn line(&mut self, display: &str, number: u64, bytes: &[u8]) -> bool {
        // As read shows it: its number, a tab, the line; under the file's path.
        let line = format!("{number}\t{}", line_text(bytes, number == 1));
        self.out.entry_under(Some(display), &line)
    }

    fn gap(&mut self) {
        self.out.pending_break = true;
    }

    fn end_lines(&mut self, keep: bool) -> bool {
        let mark = self.mark.take();
        if !keep {
            if let Some((len, before)) = mark {
                let text = std::mem::take(&mut self.out.text);
                self.out = before;
                self.out.text = text;
                self.out.text.truncate(len);
            }
            return false;
        }
        self.out.end_file();
        self.out.file_shown
    }
}

/// The answer's text: the entries, then the footers.
fn finish(out: Out, req: &GrepRequest<'_>, end: &GrepEnd, limit: &str) -> String {
    let unit = unit(req.spec.mode);
    let mut text = out.text;
    if out.shown == 0 && !out.capped {
        text = if out.seen > 0 && req.offset > 0 {
            format!("No {unit} past offset {} ({} in all)", req.offset, out.seen)
        } else {
            match req.spec.mode {
                GrepMode::FilesWithMatches => "No files found".to_owned(),
                GrepMode::Content | GrepMode::Count => "No matches found".to_owned(),
            }
        };
    }
    let next = req.offset + out.shown;
    let mut footers = Vec::new();
    if let Some((searched, total)) = end.timed_out {
        footers.push(format!(
            "(The search stopped at its time limit of {limit} with {searched} of {total} files searched: more matches may exist. Narrow the path, glob or type, or simplify the pattern.)"
        ));
    }
    if out.capped {
        let files = if req.spec.mode == GrepMode::Content {
            format!(" in {} files", out.hidden_files)
        } else {
            String::new()
        };
        footers.push(format!(
            "(Output capped at {}: {} more {unit}{files} not shown. Narrow the pattern, path, glob or type, or continue with offset={next}.)",
            budget_text(req.budget),
            out.hidden,
        ));
    } else if out.head_reached {
        footers.push(format!(
            "(Showing {unit} {}-{next}; more follow: use offset={next} to continue.)",
            req.offset + 1
        ));
    }
    if end.unreadable > 0 {
        footers.push(format!("({} files could not be read and were skipped.)", end.unreadable));
    }
    if end.too_big > 0 {
        footers.push(format!(
            "({} files over {} MiB were not searched: a multiline search reads each file whole. Search them without multiline.)",
            end.too_big,
            SEARCH_WHOLE_MAX_BYTES >> 20
        ));
    }
    if end.truncated {
        footers.push(
            "(The folder has too many files: only part of it was searched. Narrow the path.)".to_owned(),
        );
    }
    let mut text = text.trim_end_matches('\n').to_owned();
    for footer in footers {
        text.push_str("\n\n");
        text.push_str(&footer);
    }
    text
}

#[cfg(test)]
#[path = "grep_tests.rs"]
mod tests;
