//! The `glob` and `grep` tools, built on ripgrep's libraries: `globset` for file-name globs,
//! `ignore`'s file types and overrides for grep's `type` and `glob`, `grep-regex` and
//! `grep-searcher` for the search itself (binary files skipped at their first NUL byte). The
//! files come from the file context (ignore files, hidden entries, symlinks and deny rules
//! already handled there), and every answer stays within the session's read budget with a
//! footer saying what was left out. A `content` grep that shows lines of a file records it as
//! read at the version searched.

use std::io;

use filectx_protocol::tools::{GLOB_MAX_PATHS, READ_LINE_MAX_CHARS};
use globset::GlobBuilder;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use ignore::overrides::OverrideBuilder;
use ignore::types::TypesBuilder;

use super::render::CUT_SUFFIX;
use crate::context::search::{Needles, SearchContents, SearchFile, SearchFiles};
use crate::context::{ContextError, FileContext};

/// Bytes kept for the footer of a search answer.
const FOOTER_ROOM: usize = 400;

/// What grep shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The paths of matching files, newest first.
    FilesWithMatches,
    /// Matching lines (and context lines).
    Content,
    /// Matching lines per file.
    Count,
}

impl Mode {
    /// The mode named `name` on the wire.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "files_with_matches" => Some(Self::FilesWithMatches),
            "content" => Some(Self::Content),
            "count" => Some(Self::Count),
            _ => None,
        }
    }

    fn unit(self) -> &'static str {
        match self {
            Self::Content => "lines",
            Self::FilesWithMatches | Self::Count => "files",
        }
    }
}

/// A grep request, validated.
#[derive(Debug, Clone)]
pub struct GrepRequest<'a> {
    /// The regular expression.
    pub pattern: &'a str,
    /// The file or folder searched (default: the cwd).
    pub path: Option<&'a str>,
    /// Only files matching this glob (ripgrep's `-g`).
    pub glob: Option<&'a str>,
    /// Only files of this ripgrep type.
    pub file_type: Option<&'a str>,
    /// What to show.
    pub mode: Mode,
    /// Case-insensitive matching.
    pub case_insensitive: bool,
    /// Context lines around matches (content mode).
    pub context: usize,
    /// Whether a match may span lines.
    pub multiline: bool,
    /// Most entries shown.
    pub head_limit: Option<u64>,
    /// Entries skipped first.
    pub offset: u64,
    /// The session's output budget in bytes.
    pub budget: u64,
}

/// Why a search could not run.
#[derive(Debug)]
pub enum SearchError {
    /// An argument is wrong (a bad pattern, glob or type), phrased for the model.
    Invalid(String),
    /// The file context refused or failed.
    File(ContextError),
}

impl From<ContextError> for SearchError {
    fn from(err: ContextError) -> Self {
        Self::File(err)
    }
}

fn budget_text(budget: u64) -> String {
    if budget.is_multiple_of(1024) { format!("{} KiB", budget / 1024) } else { format!("{budget} bytes") }
}

fn cancelled(files: &SearchFiles) -> SearchError {
    SearchError::File(ContextError::Cancelled { path: files.base.display().to_string() })
}

/// `glob`: the files under `path` whose path relative to it matches `pattern`, newest first.
pub fn glob(
    ctx: &FileContext<'_>,
    pattern: &str,
    path: Option<&str>,
    budget: u64,
    stop: &(dyn Fn() -> bool + Sync),
) -> Result<String, SearchError> {
    let matcher = GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map_err(|e| SearchError::Invalid(format!("The glob pattern is not valid: {e}.")))?
        .compile_matcher();
    let files = ctx.search_files(path, stop)?;
    let mut hits: Vec<SearchFile> = (0..files.len())
        .filter(|&i| matcher.is_match(files.under(i)))
        .filter_map(|i| ctx.search_file(&files, i))
        .collect();
    hits.sort_by(|a, b| b.mtime_ns.cmp(&a.mtime_ns).then_with(|| a.display.cmp(&b.display)));
    let room = usize::try_from(budget).unwrap_or(usize::MAX).saturating_sub(FOOTER_ROOM);
    let mut text = String::new();
    let mut shown = 0usize;
    let mut more = 0usize;
    for file in &hits {
        if stop() {
            return Err(cancelled(&files));
        }
        if shown >= GLOB_MAX_PATHS || text.len() + file.display.len() + 1 > room {
            more += 1;
            continue;
        }
        // Listed only while it is still a file reached through no symlink.
        if !ctx.still_listed(&files, file) {
            continue;
        }
        text.push_str(&file.display);
        text.push('\n');
        shown += 1;
    }
    if shown == 0 && more == 0 {
        text.push_str("No files found");
        if files.truncated {
            text.push_str(" (the folder has too many files to list them all: narrow the path)");
        }
        return Ok(text);
    }
    if more > 0 {
        text.push_str(&format!(
            "\n({more} more matching files not shown; at most {GLOB_MAX_PATHS} paths are listed. Narrow the pattern or path.)"
        ));
    }
    if files.truncated {
        text.push_str("\n(The folder has too many files: only part of it was listed. Narrow the path.)");
    }
    Ok(text.trim_end_matches('\n').to_owned())
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
        self.seen += 1;
        if self.seen <= self.offset {
            return true;
        }
        if self.head.is_some_and(|h| self.shown >= h) {
            self.head_reached = true;
            return false;
        }
        let separator = if self.pending_break && self.shown > 0 { 3 } else { 0 };
        if self.capped || self.text.len() + separator + line.len() + 1 > self.room {
            self.capped = true;
            self.hidden += 1;
            self.file_hidden = true;
            return true;
        }
        if separator > 0 {
            self.text.push_str("--\n");
        }
        self.pending_break = false;
        self.text.push_str(line);
        self.text.push('\n');
        self.shown += 1;
        self.file_shown = true;
        true
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

/// Feeds one file's matches into [`Out`].
struct FileSink<'o> {
    out: &'o mut Out,
    mode: Mode,
    display: &'o str,
    count: u64,
    matched: bool,
    binary: bool,
    stopped: bool,
}

impl FileSink<'_> {
    fn line(&mut self, number: u64, bytes: &[u8], sep: char) -> bool {
        let line = format!("{}{sep}{number}{sep}{}", self.display, line_text(bytes, number == 1));
        let go_on = self.out.entry(&line);
        self.stopped |= !go_on;
        go_on
    }
}

impl Sink for FileSink<'_> {
    type Error = io::Error;

    fn matched(&mut self, _: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, io::Error> {
        self.matched = true;
        match self.mode {
            Mode::FilesWithMatches => Ok(false),
            Mode::Count => {
                self.count += mat.lines().count().max(1) as u64;
                Ok(true)
            }
            Mode::Content => {
                let first = mat.line_number().unwrap_or(1);
                for (i, line) in mat.lines().enumerate() {
                    if !self.line(first + i as u64, line, ':') {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
        }
    }

    fn context(&mut self, _: &Searcher, ctx: &SinkContext<'_>) -> Result<bool, io::Error> {
        if self.mode != Mode::Content {
            return Ok(true);
        }
        Ok(self.line(ctx.line_number().unwrap_or(0), ctx.bytes(), '-'))
    }

    fn context_break(&mut self, _: &Searcher) -> Result<bool, io::Error> {
        self.out.pending_break = true;
        Ok(true)
    }

    fn binary_data(&mut self, _: &Searcher, _: u64) -> Result<bool, io::Error> {
        self.binary = true;
        Ok(false)
    }
}

/// `grep`: a regex search of the files under the request's path.
pub fn grep(
    ctx: &FileContext<'_>,
    req: &GrepRequest<'_>,
    stop: &(dyn Fn() -> bool + Sync),
) -> Result<String, SearchError> {
    let mut builder = RegexMatcherBuilder::new();
    builder.case_insensitive(req.case_insensitive).multi_line(true);
    if req.multiline {
        builder.dot_matches_new_line(true);
    } else {
        builder.line_terminator(Some(b'\n'));
    }
    let matcher = builder
        .build(req.pattern)
        .map_err(|e| SearchError::Invalid(format!("The pattern is not a valid regular expression: {e}")))?;
    let types = match req.file_type {
        None => None,
        Some(name) => {
            let mut types = TypesBuilder::new();
            types.add_defaults().select(name);
            Some(types.build().map_err(|e| {
                SearchError::Invalid(format!(
                    "{e}. Use one of ripgrep's file types: rust, py, js, ts, go, c, cpp, java, md, ..."
                ))
            })?)
        }
    };
    let files = ctx.search_files(req.path, stop)?;
    let overrides = match req.glob {
        None => None,
        Some(glob) => {
            let mut builder = OverrideBuilder::new(&files.base);
            builder.add(glob).map_err(|e| SearchError::Invalid(format!("The glob is not valid: {e}.")))?;
            Some(builder.build().map_err(|e| SearchError::Invalid(format!("The glob is not valid: {e}.")))?)
        }
    };
    let wanted = |index: usize| {
        if files.single {
            return true;
        }
        let under = files.under(index);
        !types.as_ref().is_some_and(|t| t.matched(under, false).is_ignore())
            && !overrides.as_ref().is_some_and(|o| o.matched(files.base.join(under), false).is_ignore())
    };
    let needles = needles(req);
    let must_read = files.must_read(&needles);
    let candidates: Vec<SearchFile> = (0..files.len())
        .filter(|&i| must_read.as_ref().is_none_or(|m| m[i]))
        .filter(|&i| wanted(i))
        .filter_map(|i| ctx.search_file(&files, i))
        .collect();
    let room = usize::try_from(req.budget).unwrap_or(usize::MAX).saturating_sub(FOOTER_ROOM);
    let mut out = Out { room, offset: req.offset, head: req.head_limit, ..Out::default() };
    let mut unreadable = 0u64;
    // files_with_matches: every matching file first, then listed newest first.
    let mut matching: Vec<SearchFile> = Vec::new();
    let mut lines = Lines::new(req);
    // Which files match is found on a few threads, a batch at a time; what they show is then
    // added in path order, so the answer is the same as one thread's.
    'batches: for batch in candidates.chunks(PROBE_BATCH) {
        if stop() {
            return Err(cancelled(&files));
        }
        let probes = probe_all(ctx, &files, batch, &matcher, req.mode == Mode::Count, stop);
        for (file, probe) in batch.iter().zip(probes) {
            match probe {
                Probe::Unreadable => unreadable += 1,
                Probe::Skip => {}
                Probe::Matched(count) => match req.mode {
                    Mode::FilesWithMatches => matching.push(file.clone()),
                    Mode::Count => {
                        out.start_file();
                        out.entry(&format!("{}:{count}", file.display));
                        out.end_file();
                    }
                    Mode::Content => match lines.show(ctx, &files, file, &matcher, &mut out) {
                        Shown::Unreadable => unreadable += 1,
                        Shown::Done => {}
                        Shown::Stop => break 'batches,
                    },
                },
            }
            if out.head_reached {
                break 'batches;
            }
        }
    }
    if stop() {
        return Err(cancelled(&files));
    }
    files.fill_filters();
    if req.mode == Mode::FilesWithMatches {
        matching.sort_by(|a, b| b.mtime_ns.cmp(&a.mtime_ns).then_with(|| a.display.cmp(&b.display)));
        for file in matching {
            out.start_file();
            if !out.entry(&file.display) {
                break;
            }
            out.end_file();
        }
    }
    Ok(finish(out, req, unreadable, files.truncated))
}

/// Files one probe batch holds: enough to keep the threads busy, few enough that a search
/// with a `head_limit` stops soon after it is reached.
const PROBE_BATCH: usize = 256;

/// Whether one file matches (and how many lines, when counting).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Probe {
    /// It could not be opened or read.
    Unreadable,
    /// No match, or a binary file.
    Skip,
    /// It matches: lines counted when asked, else 1.
    Matched(u64),
}

/// The searcher every grep uses to find matches (no context: a probe shows nothing).
fn probe_searcher(multiline: bool) -> Searcher {
    SearcherBuilder::new()
        .binary_detection(BinaryDetection::quit(b'\x00'))
        .line_number(false)
        .multi_line(multiline)
        .build()
}

/// Probes `batch` on up to two threads, in order.
fn probe_all(
    ctx: &FileContext<'_>,
    files: &SearchFiles,
    batch: &[SearchFile],
    matcher: &RegexMatcher,
    count: bool,
    stop: &(dyn Fn() -> bool + Sync),
) -> Vec<Probe> {
    let multiline = matcher_multiline(matcher);
    let next = AtomicUsize::new(0);
    let results: Vec<Mutex<Probe>> = batch.iter().map(|_| Mutex::new(Probe::Skip)).collect();
    let work = || {
        let mut searcher = probe_searcher(multiline);
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(file) = batch.get(i) else { break };
            // Tests slow a search down here to cancel it midway.
            #[cfg(feature = "failpoints")]
            fail::fail_point!("search::file");
            if stop() {
                break;
            }
            let probe = probe(ctx, files, file, matcher, &mut searcher, count);
            *results[i].lock().unwrap_or_else(PoisonError::into_inner) = probe;
        }
    };
    if batch.len() < 8 || probe_threads() < 2 {
        work();
    } else {
        std::thread::scope(|scope| {
            scope.spawn(work);
            work();
        });
    }
    results.into_iter().map(|r| r.into_inner().unwrap_or_else(PoisonError::into_inner)).collect()
}

fn probe_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Whether `matcher` was built for matches spanning lines.
fn matcher_multiline(matcher: &RegexMatcher) -> bool {
    grep_matcher::Matcher::line_terminator(matcher).is_none()
}

/// Whether `file` matches: read whole or, when big, as a stream; a file with a NUL byte is
/// binary and skipped.
fn probe(
    ctx: &FileContext<'_>,
    files: &SearchFiles,
    file: &SearchFile,
    matcher: &RegexMatcher,
    searcher: &mut Searcher,
    count: bool,
) -> Probe {
    let mut sink = ProbeSink { count, matched: 0, binary: false };
    let searched = match ctx.open_search_bytes(files, file) {
        Err(_) => return Probe::Unreadable,
        Ok(SearchContents::Bytes(bytes) | SearchContents::Whole { bytes, .. }) => {
            if memchr::memchr(0, &bytes).is_some() {
                return Probe::Skip;
            }
            searcher.search_slice(matcher, &bytes, &mut sink)
        }
        Ok(SearchContents::Stream(handle)) => searcher.search_file(matcher, &handle, &mut sink),
    };
    match searched {
        Err(_) => Probe::Unreadable,
        Ok(()) if sink.binary || sink.matched == 0 => Probe::Skip,
        Ok(()) => Probe::Matched(sink.matched),
    }
}

/// Counts matching lines (or stops at the first, when not counting).
struct ProbeSink {
    count: bool,
    matched: u64,
    binary: bool,
}

impl Sink for ProbeSink {
    type Error = io::Error;

    fn matched(&mut self, _: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, io::Error> {
        self.matched += mat.lines().count().max(1) as u64;
        Ok(self.count)
    }

    fn binary_data(&mut self, _: &Searcher, _: u64) -> Result<bool, io::Error> {
        self.binary = true;
        Ok(false)
    }
}

/// Literals every match needs, from the pattern's prefixes and suffixes (regex-syntax's
/// extractor): a file without one of them cannot match, so a warm listing's trigram filters
/// skip it unread. Parsed as grep-regex parses it, or wider (a superset of matches only ever
/// adds literals): empty when unknown.
fn needles(req: &GrepRequest<'_>) -> Needles {
    use regex_syntax::hir::literal::{ExtractKind, Extractor};
    let parsed = regex_syntax::ParserBuilder::new()
        .case_insensitive(req.case_insensitive)
        .multi_line(true)
        .dot_matches_new_line(req.multiline)
        .utf8(false)
        .build()
        .parse(req.pattern);
    let Ok(hir) = parsed else { return Needles::default() };
    let mut groups = Vec::new();
    for kind in [ExtractKind::Prefix, ExtractKind::Suffix] {
        let mut extractor = Extractor::new();
        extractor.kind(kind);
        let seq = extractor.extract(&hir);
        if let Some(literals) = seq.literals()
            && !literals.is_empty()
            && literals.iter().all(|l| l.as_bytes().len() >= 3)
        {
            groups.push(literals.iter().map(|l| l.as_bytes().to_vec()).collect());
        }
    }
    Needles(groups)
}

/// How a `content` grep shows the lines of a matching file.
enum Shown {
    /// Shown (or counted past the budget).
    Done,
    /// It could not be read.
    Unreadable,
    /// `head_limit` reached: stop.
    Stop,
}

/// The searcher that shows lines (with context), for `content` greps.
struct Lines {
    searcher: Searcher,
    mode: Mode,
    context: usize,
}

impl Lines {
    fn new(req: &GrepRequest<'_>) -> Self {
        let context = if req.mode == Mode::Content { req.context } else { 0 };
        let searcher = SearcherBuilder::new()
            .binary_detection(BinaryDetection::quit(b'\x00'))
            .line_number(true)
            .multi_line(req.multiline)
            .before_context(context)
            .after_context(context)
            .build();
        Self { searcher, mode: req.mode, context }
    }

    /// Adds the lines of `file` to `out`; when lines were shown, the file counts as read at
    /// the version searched.
    fn show(
        &mut self,
        ctx: &FileContext<'_>,
        files: &SearchFiles,
        file: &SearchFile,
        matcher: &RegexMatcher,
        out: &mut Out,
    ) -> Shown {
        // Read whole and hashed, to record what it showed as read.
        let Ok(contents) = ctx.open_search_file(files, file, true) else { return Shown::Unreadable };
        // Counters only (the text is cut back to its length): cheap per file.
        let text = std::mem::take(&mut out.text);
        let mark = (text.len(), out.clone());
        out.text = text;
        out.start_file();
        out.pending_break |= self.context > 0 && out.shown > 0;
        let mut sink = FileSink {
            out,
            mode: self.mode,
            display: &file.display,
            count: 0,
            matched: false,
            binary: false,
            stopped: false,
        };
        let (searched, whole) = match contents {
            SearchContents::Whole { bytes, seen } => {
                if memchr::memchr(0, &bytes).is_some() {
                    return Shown::Done;
                }
                (self.searcher.search_slice(matcher, &bytes, &mut sink), Some((bytes, seen)))
            }
            SearchContents::Bytes(bytes) => (self.searcher.search_slice(matcher, &bytes, &mut sink), None),
            SearchContents::Stream(handle) => (self.searcher.search_file(matcher, &handle, &mut sink), None),
        };
        let (binary, stopped) = (sink.binary, sink.stopped);
        if searched.is_err() || binary {
            // Undo what this file added: a binary file is skipped whole.
            let (len, before) = mark;
            let text = std::mem::take(&mut out.text);
            *out = before;
            out.text = text;
            out.text.truncate(len);
            return if searched.is_err() { Shown::Unreadable } else { Shown::Done };
        }
        out.end_file();
        if let Some((bytes, seen)) = whole.filter(|_| out.file_shown) {
            ctx.record_search(files, file, &seen, bytes);
        }
        if stopped || out.head_reached { Shown::Stop } else { Shown::Done }
    }
}

/// The answer's text: the entries, then the footers.
fn finish(out: Out, req: &GrepRequest<'_>, unreadable: u64, truncated: bool) -> String {
    let unit = req.mode.unit();
    let mut text = out.text;
    if out.shown == 0 && !out.capped {
        text = if out.seen > 0 && req.offset > 0 {
            format!("No {unit} past offset {} ({} in all)", req.offset, out.seen)
        } else {
            match req.mode {
                Mode::FilesWithMatches => "No files found".to_owned(),
                Mode::Content | Mode::Count => "No matches found".to_owned(),
            }
        };
    }
    let next = req.offset + out.shown;
    let mut footers = Vec::new();
    if out.capped {
        let files =
            if req.mode == Mode::Content { format!(" in {} files", out.hidden_files) } else { String::new() };
        footers.push(format!(
            "(Output capped at {}: {} more {unit}{files} not shown. Narrow the pattern, path, glob or type, or use head_limit and offset (offset={next} continues).)",
            budget_text(req.budget),
            out.hidden,
        ));
    } else if out.head_reached {
        footers.push(format!(
            "(Showing {unit} {}-{next}; more follow: use offset={next} to continue.)",
            req.offset + 1
        ));
    }
    if unreadable > 0 {
        footers.push(format!("({unreadable} files could not be read and were skipped.)"));
    }
    if truncated {
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
mod tests {
    use super::*;
    use std::path::Path;

    fn is_match(pattern: &str, path: &str) -> bool {
        GlobBuilder::new(pattern)
            .literal_separator(true)
            .build()
            .unwrap()
            .compile_matcher()
            .is_match(Path::new(path))
    }

    #[test]
    fn globs_match_like_ripgrep() {
        assert!(is_match("**/*.rs", "a.rs"));
        assert!(is_match("**/*.rs", "src/deep/a.rs"));
        assert!(!is_match("*.rs", "src/a.rs"), "* stays within a folder");
        assert!(is_match("src/**/*.{ts,tsx}", "src/x/y.tsx"));
    }

    #[test]
    fn lines_are_cut_and_cleaned() {
        assert_eq!(line_text(b"\xEF\xBB\xBFfn main() {\r\n", true), "fn main() {");
        let long = "x".repeat(2500);
        let cut = line_text(long.as_bytes(), false);
        assert_eq!(cut, format!("{}{CUT_SUFFIX}", "x".repeat(2000)));
    }

    #[test]
    fn entries_respect_offset_head_and_budget() {
        let mut out = Out { room: 10, offset: 1, head: Some(2), ..Out::default() };
        assert!(out.entry("skip"));
        assert!(out.entry("abc"));
        assert!(out.entry("this is too long"));
        assert!(out.capped && out.hidden == 1 && out.shown == 1);
        let mut out = Out { room: 100, head: Some(1), ..Out::default() };
        assert!(out.entry("a"));
        assert!(!out.entry("b"));
        assert!(out.head_reached);
    }
}
