//! The `grep` tool: which files match (probed on two threads, each search bounded in memory
//! and time), then the answer in its output mode (paths, counts, or matching lines with their
//! context, shown as `read` shows lines and recorded as read) within the session's budget.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use filectx_protocol::tools::{GrepOutputMode, READ_LINE_MAX_CHARS};
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use ignore::overrides::OverrideBuilder;
use ignore::types::TypesBuilder;

use super::bounds::{
    Budget, FOOTER_ROOM, Limits, RegexLimits, SEARCH_HEAP_BYTES, SearchError, SearchListed, Stopped,
    cancelled, listed,
};
use crate::context::search::{
    BINARY_BYTE, BINARY_PEEK, Needles, SEARCH_WHOLE_MAX_BYTES, SearchContents, SearchFile, SearchFiles,
    is_binary,
};
use crate::context::{ContextError, FileContext, ProviderError};
use crate::tools::pieces::{PieceSize, Pieced, search_pieces};
use crate::tools::render::CUT_SUFFIX;

/// Whether grep-regex refused a pattern for its compiled size (its text for that case, which
/// a unit test pins).
fn too_big(err: &grep_regex::Error) -> bool {
    matches!(err.kind(), grep_regex::ErrorKind::Regex(text) if text.starts_with("compiled regex exceeds size limit"))
}

/// What an answer in `mode` counts its entries in.
fn unit(mode: GrepOutputMode) -> &'static str {
    match mode {
        GrepOutputMode::Content => "lines",
        GrepOutputMode::FilesWithMatches | GrepOutputMode::Count => "files",
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
    pub mode: GrepOutputMode,
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

/// Feeds one file's matches into [`Out`].
struct FileSink<'o> {
    out: &'o mut Out,
    mode: GrepOutputMode,
    display: &'o str,
    count: u64,
    matched: bool,
    binary: bool,
    stopped: bool,
}

impl FileSink<'_> {
    /// Adds one line as read shows it (its number, a tab, the line), under the file's path.
    fn line(&mut self, number: u64, bytes: &[u8]) -> bool {
        let line = format!("{number}\t{}", line_text(bytes, number == 1));
        let go_on = self.out.entry_under(Some(self.display), &line);
        self.stopped |= !go_on;
        go_on
    }
}

impl Sink for FileSink<'_> {
    type Error = io::Error;

    fn matched(&mut self, _: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, io::Error> {
        self.matched = true;
        match self.mode {
            GrepOutputMode::FilesWithMatches => Ok(false),
            GrepOutputMode::Count => {
                self.count += mat.lines().count().max(1) as u64;
                Ok(true)
            }
            GrepOutputMode::Content => {
                let first = mat.line_number().unwrap_or(1);
                for (i, line) in mat.lines().enumerate() {
                    if !self.line(first + i as u64, line) {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
        }
    }

    fn context(&mut self, _: &Searcher, ctx: &SinkContext<'_>) -> Result<bool, io::Error> {
        if self.mode != GrepOutputMode::Content {
            return Ok(true);
        }
        Ok(self.line(ctx.line_number().unwrap_or(0), ctx.bytes()))
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

/// The MiB (or KiB) figure of `bytes`, as the model reads it.
fn size_text(bytes: usize) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{} KiB", bytes.div_ceil(1024))
    }
}

/// The request's matcher, within `limits`.
fn matcher(req: &GrepRequest<'_>, limits: RegexLimits) -> Result<RegexMatcher, SearchError> {
    let mut builder = RegexMatcherBuilder::new();
    builder
        .case_insensitive(req.case_insensitive)
        .multi_line(true)
        .size_limit(limits.program)
        .dfa_size_limit(limits.dfa_cache);
    if req.multiline {
        builder.dot_matches_new_line(true);
    } else {
        builder.line_terminator(Some(b'\n'));
    }
    builder.build(req.pattern).map_err(|e| {
        if too_big(&e) {
            SearchError::Invalid(format!(
                "The pattern is too big: compiled, it exceeds the {} a search's pattern may take. Simplify it (smaller counted repetitions like {{n}}; ASCII classes such as [A-Za-z0-9_] instead of Unicode \\w) and search again.",
                size_text(limits.program)
            ))
        } else {
            SearchError::Invalid(format!("The pattern is not a valid regular expression: {e}"))
        }
    })
}

/// `grep`: a regex search of the files under the request's path, within `limits`.
pub fn grep(
    ctx: &FileContext<'_>,
    req: &GrepRequest<'_>,
    limits: &Limits<'_>,
) -> Result<String, SearchError> {
    let matcher = matcher(req, RegexLimits::of(limits.regex_bytes))?;
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
    let budget = Budget::new(limits);
    let files = match listed(ctx, req.path, &budget, None)? {
        SearchListed::Files(files) => files,
        SearchListed::TimedOut(answer) => return Ok(answer),
    };
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
        .filter(|&i| must_read.as_ref().is_none_or(|m| m.get(i).copied().unwrap_or(true)))
        .filter(|&i| wanted(i))
        .filter_map(|i| ctx.search_file(&files, i))
        .collect();
    let room = usize::try_from(req.budget).unwrap_or(usize::MAX).saturating_sub(FOOTER_ROOM);
    let mut out =
        Out { room, escaped: req.escaped, offset: req.offset, head: req.head_limit, ..Out::default() };
    let mut skipped = Skipped::default();
    // Candidates searched to their end (a file whose lines were being shown when time ran out
    // does not count).
    let mut searched = 0usize;
    // files_with_matches: every matching file first, then listed newest first.
    let mut matching: Vec<SearchFile> = Vec::new();
    let mut lines = Lines::new(req);
    // Which files match is found on a few threads, a batch at a time; what they show is then
    // added in path order, so the answer is the same as one thread's.
    'batches: for batch in batches(&candidates) {
        if budget.stop() {
            break;
        }
        let probes = probe_all(ctx, &files, batch, &matcher, req.mode == GrepOutputMode::Count, &budget);
        if budget.cancelled() {
            return Err(cancelled(&files));
        }
        for (file, probe) in batch.iter().zip(probes) {
            match probe {
                Probe::Unsearched => continue,
                Probe::Unreadable => skipped.unreadable += 1,
                Probe::TooBig => skipped.too_big += 1,
                Probe::Skip => {}
                Probe::Matched(count) => match req.mode {
                    GrepOutputMode::FilesWithMatches => matching.push(file.clone()),
                    GrepOutputMode::Count => {
                        out.start_file();
                        out.entry(&format!("{}:{count}", file.display));
                        out.end_file();
                    }
                    GrepOutputMode::Content => {
                        match lines.show(ctx, &files, file, &matcher, &mut out, &budget) {
                            Shown::Unreadable => skipped.unreadable += 1,
                            Shown::Done => {}
                            Shown::Stop => {
                                searched += 1;
                                break 'batches;
                            }
                            Shown::Stopped => break 'batches,
                        }
                    }
                },
            }
            searched += 1;
            if out.head_reached {
                break 'batches;
            }
        }
    }
    if budget.cancelled() {
        return Err(cancelled(&files));
    }
    files.fill_filters();
    if req.mode == GrepOutputMode::FilesWithMatches {
        // Each time looked up once (a file the walk left undated is dated here).
        let mut matching: Vec<(i64, SearchFile)> =
            matching.into_iter().map(|file| (files.mtime_of(&file), file)).collect();
        matching.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.display.cmp(&b.1.display)));
        for (_, file) in matching {
            out.start_file();
            if !out.entry(&file.display) {
                break;
            }
            out.end_file();
        }
    }
    // Why it stopped before every candidate was searched, if it did; out of time, it says how
    // much was searched.
    let stopped = match (searched < candidates.len(), out.head_reached) {
        (false, _) => None,
        (true, true) => Some(Stopped::Bounded),
        (true, false) => budget.stopped(),
    };
    let timed_out = (stopped == Some(Stopped::TimedOut)).then(|| {
        // Every file the search would look at (the filters' skips count as searched).
        let total = (0..files.len()).filter(|&i| wanted(i) && ctx.search_file(&files, i).is_some()).count();
        let unsearched = candidates.len() - searched;
        TimedOut { limit: budget.limit_text(), searched: total.saturating_sub(unsearched), total }
    });
    Ok(finish(out, req, &skipped, timed_out.as_ref(), files.truncated))
}

/// Files the first probe batch holds: enough to keep the threads busy, few enough that a
/// search with a `head_limit` stops soon after it is reached. Each next batch is twice as big,
/// up to [`PROBE_BATCH_MAX`]: a search of 100,000 files waits for its slower thread at the end
/// of a batch (and starts one anew) 18 times instead of 390.
const PROBE_BATCH: usize = 256;
/// Files the biggest probe batch holds.
const PROBE_BATCH_MAX: usize = 8192;

/// `candidates` in batches of [`PROBE_BATCH`] files, then each twice the last, up to
/// [`PROBE_BATCH_MAX`].
fn batches(candidates: &[SearchFile]) -> impl Iterator<Item = &[SearchFile]> {
    let mut rest = candidates;
    let mut size = PROBE_BATCH;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let (batch, after) = rest.split_at(size.min(rest.len()));
        rest = after;
        size = (size * 2).min(PROBE_BATCH_MAX);
        Some(batch)
    })
}

/// Whether one file matches (and how many lines, when counting).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Probe {
    /// Not searched to its end: the search stopped first.
    Unsearched,
    /// It could not be opened or read.
    Unreadable,
    /// Too big for a multiline search, which reads each file whole.
    TooBig,
    /// No match, or a binary file.
    Skip,
    /// It matches: lines counted when asked, else 1.
    Matched(u64),
}

/// Files a search skipped, by why.
#[derive(Debug, Default)]
struct Skipped {
    unreadable: u64,
    too_big: u64,
}

/// How far a search got before its time ran out.
#[derive(Debug)]
struct TimedOut {
    limit: String,
    searched: usize,
    total: usize,
}

/// The searcher every grep uses to find matches (no context: a probe shows nothing); without
/// `binary` detection for bytes already looked through for a NUL.
fn probe_searcher(multiline: bool, binary: bool) -> Searcher {
    let binary = if binary { BinaryDetection::quit(BINARY_BYTE) } else { BinaryDetection::none() };
    SearcherBuilder::new()
        .binary_detection(binary)
        .line_number(false)
        .multi_line(multiline)
        .heap_limit(Some(SEARCH_HEAP_BYTES))
        .build()
}

/// Probes `batch` on up to two threads, in order, until `budget` says stop.
fn probe_all(
    ctx: &FileContext<'_>,
    files: &SearchFiles,
    batch: &[SearchFile],
    matcher: &RegexMatcher,
    count: bool,
    budget: &Budget<'_>,
) -> Vec<Probe> {
    let multiline = matcher_multiline(matcher);
    let next = AtomicUsize::new(0);
    let results: Vec<Mutex<Probe>> = batch.iter().map(|_| Mutex::new(Probe::Unsearched)).collect();
    let work = || {
        let mut searchers = (probe_searcher(multiline, true), probe_searcher(multiline, false));
        let mut pace = PieceSize::default();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(file) = batch.get(i) else { break };
            // Tests slow a search down here to cancel it midway.
            #[cfg(feature = "failpoints")]
            fail::fail_point!("search::file");
            if budget.stop() {
                break;
            }
            let probe = probe(ctx, files, file, matcher, &mut searchers, &mut pace, count, budget);
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

/// Whether `file` matches: read whole or, when big, as a stream, in pieces between which
/// `budget` is asked; a file with a NUL byte is binary and skipped. A multiline search runs
/// over the whole file at once (a match may span any lines), so it stops only between files,
/// and skips files too big to read whole. `searchers`: one that detects binary data (for
/// streams), one that does not (for bytes looked through for a NUL already).
#[allow(clippy::too_many_arguments)]
fn probe(
    ctx: &FileContext<'_>,
    files: &SearchFiles,
    file: &SearchFile,
    matcher: &RegexMatcher,
    (searcher, bytes_searcher): &mut (Searcher, Searcher),
    pace: &mut PieceSize,
    count: bool,
    budget: &Budget<'_>,
) -> Probe {
    let mut sink = ProbeSink { count, matched: 0, binary: false };
    let stop = || budget.stop();
    let multiline = searcher.multi_line_with_matcher(matcher);
    // Bytes read unhashed were looked through for a NUL as far as their start already.
    let (bytes, checked) = match ctx.open_search_bytes(files, file) {
        Err(e) if gone(&e) => return Probe::Skip,
        Err(_) => return Probe::Unreadable,
        Ok(SearchContents::Binary) => return Probe::Skip,
        Ok(SearchContents::Bytes(bytes)) => {
            let checked = usize::try_from(BINARY_PEEK).unwrap_or(usize::MAX).min(bytes.len());
            (bytes, checked)
        }
        Ok(SearchContents::Whole { bytes, .. }) => (bytes, 0),
        Ok(SearchContents::Stream(_)) if multiline => return Probe::TooBig,
        Ok(SearchContents::Stream(handle)) => {
            let mut paced = Pieced::new(&handle, pace, &stop);
            let searched = searcher.search_reader(matcher, &mut paced, &mut sink);
            if paced.stopped() {
                return Probe::Unsearched;
            }
            return probed(searched.map(|()| true), &sink);
        }
    };
    if is_binary(&bytes[checked..]) {
        return Probe::Skip;
    }
    let searched = if multiline {
        bytes_searcher.search_slice(matcher, &bytes, &mut sink).map(|()| true)
    } else {
        search_pieces(bytes_searcher, matcher, &bytes, &mut sink, pace, &stop, |sink| {
            !sink.count && sink.matched > 0
        })
    };
    probed(searched, &sink)
}

/// What a probe's search (`Ok(false)`: stopped before the end) into `sink` found.
fn probed(searched: io::Result<bool>, sink: &ProbeSink) -> Probe {
    match searched {
        Err(_) => Probe::Unreadable,
        Ok(false) => Probe::Unsearched,
        Ok(true) if sink.binary || sink.matched == 0 => Probe::Skip,
        Ok(true) => Probe::Matched(sink.matched),
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

/// Whether a listed file that failed to open is simply not one to search any more, rather than
/// one that could not be read: gone, no regular file now, a name that now leads through a link
/// (to outside, maybe: nothing there is counted), or one of the daemon's own files.
fn gone(err: &ContextError) -> bool {
    matches!(
        err,
        ContextError::File(
            ProviderError::NotFound { .. }
                | ProviderError::NotRegularFile { .. }
                | ProviderError::IsDirectory { .. }
                | ProviderError::Busy { .. }
                | ProviderError::Private { .. }
        )
    )
}

/// How a `content` grep shows the lines of a matching file.
enum Shown {
    /// Shown (or counted past the budget).
    Done,
    /// It could not be read.
    Unreadable,
    /// `head_limit` reached: stop.
    Stop,
    /// The search had to stop while showing it (cancelled, or out of time): what was shown
    /// stays.
    Stopped,
}

/// The searcher that shows lines (with context), for `content` greps.
struct Lines {
    searcher: Searcher,
    pace: PieceSize,
    mode: GrepOutputMode,
}

impl Lines {
    fn new(req: &GrepRequest<'_>) -> Self {
        let context = if req.mode == GrepOutputMode::Content { req.context } else { 0 };
        let searcher = SearcherBuilder::new()
            .binary_detection(BinaryDetection::quit(BINARY_BYTE))
            .line_number(true)
            .multi_line(req.multiline)
            .before_context(context)
            .after_context(context)
            .heap_limit(Some(SEARCH_HEAP_BYTES))
            .build();
        Self { searcher, pace: PieceSize::default(), mode: req.mode }
    }

    /// Searches `source` (a file) into `sink`, read in pieces between which `budget` is asked
    /// (a multiline search of bytes in memory runs over them at once); whether it was stopped.
    fn search<R: io::Read>(
        &mut self,
        matcher: &RegexMatcher,
        source: R,
        sink: &mut FileSink<'_>,
        budget: &Budget<'_>,
    ) -> (Result<(), io::Error>, bool) {
        let stop = || budget.stop_showing();
        let mut paced = Pieced::new(source, &mut self.pace, &stop);
        let searched = self.searcher.search_reader(matcher, &mut paced, sink);
        (searched, paced.stopped())
    }

    /// Adds the lines of `file` to `out`; when lines were shown, the file counts as read at
    /// the version searched (also when the search stopped while showing it: the lines shown are
    /// of that version).
    fn show(
        &mut self,
        ctx: &FileContext<'_>,
        files: &SearchFiles,
        file: &SearchFile,
        matcher: &RegexMatcher,
        out: &mut Out,
        budget: &Budget<'_>,
    ) -> Shown {
        // Read whole and hashed, to record what it showed as read.
        let contents = match ctx.open_search_file(files, file, true) {
            Ok(contents) => contents,
            Err(e) if gone(&e) => return Shown::Done,
            Err(_) => return Shown::Unreadable,
        };
        // Counters only (the text is cut back to its length): cheap per file.
        let text = std::mem::take(&mut out.text);
        let mark = (text.len(), out.clone());
        out.text = text;
        out.start_file();
        // A file's lines follow its path: no break before its first group.
        out.pending_break = false;
        let mut sink = FileSink {
            out,
            mode: self.mode,
            display: &file.display,
            count: 0,
            matched: false,
            binary: false,
            stopped: false,
        };
        let multiline = self.searcher.multi_line_with_matcher(matcher);
        let ((searched, interrupted), whole) = match contents {
            SearchContents::Whole { bytes, seen } => {
                if is_binary(&bytes) {
                    return Shown::Done;
                }
                // A multiline search runs over the whole file at once: nothing to interrupt.
                let searched = if multiline {
                    (self.searcher.search_slice(matcher, &bytes, &mut sink), false)
                } else {
                    self.search(matcher, &bytes[..], &mut sink, budget)
                };
                (searched, Some((bytes, seen)))
            }
            SearchContents::Bytes(bytes) => (self.search(matcher, &bytes[..], &mut sink, budget), None),
            SearchContents::Binary => return Shown::Done,
            SearchContents::Stream(handle) => (self.search(matcher, &handle, &mut sink, budget), None),
        };
        let (binary, stopped) = (sink.binary, sink.stopped);
        if (searched.is_err() && !interrupted) || binary {
            // Undo what this file added: a binary file is skipped whole.
            let (len, before) = mark;
            let text = std::mem::take(&mut out.text);
            *out = before;
            out.text = text;
            out.text.truncate(len);
            return if binary { Shown::Done } else { Shown::Unreadable };
        }
        out.end_file();
        if let Some((bytes, seen)) = whole.filter(|_| out.file_shown) {
            ctx.record_search(files, file, &seen, bytes);
        }
        if interrupted {
            Shown::Stopped
        } else if stopped || out.head_reached {
            Shown::Stop
        } else {
            Shown::Done
        }
    }
}

/// The answer's text: the entries, then the footers.
fn finish(
    out: Out,
    req: &GrepRequest<'_>,
    skipped: &Skipped,
    timed_out: Option<&TimedOut>,
    truncated: bool,
) -> String {
    let unit = unit(req.mode);
    let mut text = out.text;
    if out.shown == 0 && !out.capped {
        text = if out.seen > 0 && req.offset > 0 {
            format!("No {unit} past offset {} ({} in all)", req.offset, out.seen)
        } else {
            match req.mode {
                GrepOutputMode::FilesWithMatches => "No files found".to_owned(),
                GrepOutputMode::Content | GrepOutputMode::Count => "No matches found".to_owned(),
            }
        };
    }
    let next = req.offset + out.shown;
    let mut footers = Vec::new();
    if let Some(TimedOut { limit, searched, total }) = timed_out {
        footers.push(format!(
            "(The search stopped at its time limit of {limit} with {searched} of {total} files searched: more matches may exist. Narrow the path, glob or type, or simplify the pattern.)"
        ));
    }
    if out.capped {
        let files = if req.mode == GrepOutputMode::Content {
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
    if skipped.unreadable > 0 {
        footers.push(format!("({} files could not be read and were skipped.)", skipped.unreadable));
    }
    if skipped.too_big > 0 {
        footers.push(format!(
            "({} files over {} MiB were not searched: a multiline search reads each file whole. Search them without multiline.)",
            skipped.too_big,
            SEARCH_WHOLE_MAX_BYTES >> 20
        ));
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
#[path = "grep_tests.rs"]
mod tests;
