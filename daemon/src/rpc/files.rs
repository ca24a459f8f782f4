//! Handlers of the file methods: `tools/call` (model-facing), `file/*` (file-context layer,
//! structured) and `fs/*` (the context's non-recording handle). Each parses its parameters,
//! hands its file work to [`super::run`] and converts views to wire types. `tools/call` and `file/*` use the
//! observations of the owner they name (the session's default owner when they name none).

use std::sync::Arc;

use filectx_protocol::methods::{
    FILE_EDIT, FILE_READ, FILE_STAT, FILE_WRITE, FS_EDIT_TEXT, FS_READ_TEXT, FS_RESOLVE, FS_STAT,
    FS_WRITE_TEXT, TOOLS_CALL,
};
use filectx_protocol::tools::READ_LINE_LIMIT;
use filectx_protocol::{
    CallToolParams, CallToolResult, EditParams, EditResult, FileKind, FileStatParams, FileStatResult,
    FsEditParams, FsErrorCode, FsInfo, FsType, FsWriteParams, PathParams, ReadParams, ReadResult,
    ResolveResult, ToolContent, ToolError, ToolName, WriteExpectation, WriteOperation, WriteParams,
    WriteResult,
};
use jsonrpsee::Extensions;
use jsonrpsee::types::{ErrorObjectOwned, Params};

use super::error::{self, fs_error, invalid_params};
use super::run::{Op, StepAnswer, run};
use super::{PreparedResponse, Ready, ServerContext, internal, parse_params, session_of};
use crate::context::{
    ContextError, Conventions, FileContext, How, Kind, RawExpectation, Replacement, Step, Version, Warm,
    Window, WindowRequest, step,
};
use crate::session::SessionOptions;
use crate::session::owners::Owner;
use crate::tools;

/// The owner a request names, made on first use; `None` when it names none (the default owner).
pub(super) fn named_owner(
    ext: &Extensions,
    name: Option<&str>,
) -> Result<Option<Arc<Owner>>, ErrorObjectOwned> {
    let Some(name) = name else { return Ok(None) };
    Ok(Some(session_of(ext)?.owners().get(Some(name))?))
}

/// The window a read asks for: offset ≥ 1, limit in 1..=2000 (larger limits are capped), whole
/// lines (cut at `maxLineChars` when given), at most `max_bytes` of them.
fn window_of(params: &ReadParams, max_bytes: u64) -> Result<WindowRequest, ErrorObjectOwned> {
    if params.offset == Some(0) {
        return Err(fs_error(
            FsErrorCode::InvalidArgument,
            "offset must be at least 1 (lines are numbered from 1)",
            Some(&params.path),
        ));
    }
    let limit = match params.limit {
        Some(0) => {
            return Err(fs_error(
                FsErrorCode::InvalidArgument,
                "limit must be at least 1",
                Some(&params.path),
            ));
        }
        Some(n) => n.min(u64::from(READ_LINE_LIMIT)),
        None => u64::from(READ_LINE_LIMIT),
    };
    if params.max_line_chars == Some(0) {
        return Err(fs_error(
            FsErrorCode::InvalidArgument,
            "maxLineChars must be at least 1",
            Some(&params.path),
        ));
    }
    Ok(WindowRequest::whole(params.offset.unwrap_or(1), limit, max_bytes).cut_at(params.max_line_chars))
}

/// Whether lines of the file lie outside `window`.
fn partial(window: &Window) -> bool {
    let shown = window.lines.len() as u64;
    window.total_lines > 0 && (window.start_line > 1 || window.start_line + shown - 1 < window.total_lines)
}

fn read_result(display: String, version: Version, window: Window) -> ReadResult {
    ReadResult {
        display_path: display,
        version: version.to_string(),
        start_line: window.start_line,
        total_lines: window.total_lines,
        partial: partial(&window),
        lines: window.lines.to_vec(),
        truncated_lines: window.truncated,
        truncated_by_bytes: window.capped,
    }
}

/// [`read_result`] written as JSON at the end of `out`, byte for byte as serde_json writes a
/// [`ReadResult`], its lines escaped straight from the window's buffer (one after the other:
/// see [`crate::json::escape_each_into`]).
fn read_result_json(out: &mut Vec<u8>, display: &str, version: &str, window: &Window) {
    use crate::json::{number_into, string_into};
    out.extend_from_slice(br#"{"displayPath":"#);
    string_into(out, display);
    out.extend_from_slice(br#","version":"#);
    string_into(out, version);
    out.extend_from_slice(br#","startLine":"#);
    number_into(out, window.start_line);
    out.extend_from_slice(br#","lines":["#);
    if !window.lines.is_empty() {
        let (text, bounds) = window.lines.parts();
        out.push(b'"');
        crate::json::escape_each_into(out, text, bounds, |out| out.extend_from_slice(br#"",""#));
        out.push(b'"');
    }
    out.extend_from_slice(br#"],"totalLines":"#);
    number_into(out, window.total_lines);
    out.extend_from_slice(if partial(window) { br#","partial":true"# } else { br#","partial":false"# });
    out.extend_from_slice(br#","truncatedLines":["#);
    for (i, &n) in window.truncated.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        number_into(out, n);
    }
    out.extend_from_slice(if window.capped {
        br#"],"truncatedByBytes":true}"#
    } else {
        br#"],"truncatedByBytes":false}"#
    });
}

fn file_kind(kind: Kind) -> FileKind {
    match kind {
        Kind::File => FileKind::File,
        Kind::Directory => FileKind::Directory,
        Kind::Other => FileKind::Other,
        Kind::Missing => FileKind::None,
    }
}

/// The MCP-shaped result of a tool call: the model's text, and for a failure `isError` with the
/// `FS_*` code.
fn tool_result(outcome: Result<String, tools::Failure>) -> CallToolResult {
    match outcome {
        Ok(text) => {
            CallToolResult { content: vec![ToolContent::Text { text }], is_error: false, error: None }
        }
        Err(tools::Failure { text, cause }) => {
            let code = match &cause {
                tools::Cause::InvalidArgument => FsErrorCode::InvalidArgument,
                tools::Cause::File(err) => error::code(err),
            };
            CallToolResult {
                content: vec![ToolContent::Text { text }],
                is_error: true,
                error: Some(ToolError { name: "FsError".to_owned(), code }),
            }
        }
    }
}

/// What a write or edit of the file context answered, made into `f(answer)` on the wire (its
/// failure mapped as every file method maps it): now, or once its pending change is committed
/// or refused.
pub(super) fn wire<T: 'static, U: 'static>(
    files: &FileContext<'_>,
    stepped: Result<Step<T>, ContextError>,
    f: impl FnOnce(T) -> U + Send + 'static,
) -> StepAnswer<U> {
    step::then(stepped, files, |_, answer| answer.map(f).map_err(ErrorObjectOwned::from))
}

fn edit_result(view: crate::context::EditView) -> EditResult {
    EditResult {
        replacements: view.replacements,
        replace_all: view.replace_all,
        display_path: view.display,
        version: view.version.to_string(),
        diagnostics: None,
    }
}

fn write_result(display: String, created: bool, version: Version) -> WriteResult {
    WriteResult {
        operation: if created { WriteOperation::Create } else { WriteOperation::Update },
        display_path: display,
        version: version.to_string(),
        diagnostics: None,
    }
}

/// A tool call's answer, before what the rpc layer adds with nothing held: the diagnostics of
/// a change that landed, or of the file the `diagnostics` tool names.
enum Called {
    /// Answered.
    Ready(Ready<CallToolResult>),
    /// A change's text, the diagnostics of the version it wrote to follow.
    Changed(String, std::path::PathBuf, Version),
    /// The `diagnostics` tool's file.
    Diagnose(crate::context::Diagnosed),
}

impl Called {
    /// A tool's text as its call's answer.
    fn of(
        text: tools::Text,
        slot: Option<&PreparedResponse>,
        json: Option<Vec<u8>>,
    ) -> Result<Self, ErrorObjectOwned> {
        Ok(match text {
            tools::Text::Written => match (slot, json) {
                (Some(slot), Some(mut json)) => {
                    // The response's closing brace.
                    json.push(b'}');
                    slot.put(json);
                    Self::Ready(Ready::Prepared)
                }
                _ => return Err(internal("a tool wrote its text into no response")),
            },
            tools::Text::Plain(text) => Self::Ready(Ready::Value(tool_result(Ok(text)))),
            tools::Text::Changed { text, path, version } => Self::Changed(text, path, version),
            tools::Text::Diagnose(target) => Self::Diagnose(target),
        })
    }
}

/// `tools/call` (its result serialized once, see [`PreparedResponse`]; a read's text is escaped into
/// the response as it is projected).
pub async fn tools_call(
    params: Params<'static>,
    ctx: Arc<ServerContext>,
    ext: Extensions,
) -> Result<Ready<CallToolResult>, ErrorObjectOwned> {
    let slot = PreparedResponse::of(&ext);
    match tool_call(params, ctx, ext, slot.clone()).await? {
        Ready::Value(result) => Ok(PreparedResponse::offer(slot, result)),
        Ready::Prepared => Ok(Ready::Prepared),
    }
}

/// A successful `tools/call` result of one text block, written as JSON at the end of `out` byte
/// for byte as serde_json writes that [`CallToolResult`]: the envelope here, the text between
/// its quotes by `text` (escaped as it is built: see [`crate::json`]), whose answer is returned.
fn tool_text_json<T>(out: &mut Vec<u8>, text: impl FnOnce(&mut Vec<u8>) -> T) -> T {
    out.extend_from_slice(br#"{"content":[{"type":"text","text":""#);
    let made = text(out);
    out.extend_from_slice(br#""}],"isError":false}"#);
    made
}

async fn tool_call(
    params: Params<'static>,
    ctx: Arc<ServerContext>,
    ext: Extensions,
    slot: Option<PreparedResponse>,
) -> Result<Ready<CallToolResult>, ErrorObjectOwned> {
    let params: CallToolParams = parse_params(TOOLS_CALL, &params)?;
    let session = session_of(&ext)?;
    let options = session.options().ok_or_else(error::not_initialized)?;
    let tool = tools::tool(options, &params.name).map_err(|e| invalid_params(e.to_string()))?;
    let owner = match session.owners().get(params.owner.as_deref()) {
        Ok(owner) => owner,
        Err(err) => {
            let failure = tools::Failure { text: format!("{err}."), cause: tools::Cause::InvalidArgument };
            return Ok(Ready::Value(tool_result(Err(failure))));
        }
    };
    let dedup = options.dedup_reads.then(|| owner.clone());
    drop(session);
    let token = ext.get::<super::Cancel>().map(|c| c.0.clone());
    let (timeout, regex_bytes) = (ctx.config.search_timeout, ctx.config.search_regex_bytes);
    // Only a read writes its text into the response itself.
    let slot = slot.filter(|_| tool == ToolName::Read);
    #[allow(clippy::result_large_err, reason = "a tool's failure is its result (`tools::Outcome`)")]
    let work = move |files: &FileContext<'_>, options: &SessionOptions, how: How<'_>| {
        let delivered = dedup.as_deref().map(Owner::delivered);
        let cancelled = || token.as_ref().is_some_and(|t| t.is_cancelled());
        let limits = crate::search::SearchLimits { cancelled: &cancelled, timeout, regex_bytes };
        let call = |out: Option<&mut Vec<u8>>| {
            tools::call(files, options, (tool, &params.arguments), how, delivered, &limits, out)
        };
        let mut json = slot.as_ref().map(|slot| slot.start(64));
        let outcome = match json.as_mut() {
            Some(out) => tool_text_json(out, |out| call(Some(out))),
            None => call(None),
        };
        match outcome {
            Ok(Step::Done(text)) => Called::of(text, slot.as_ref(), json).map(Step::Done),
            Ok(Step::NeedsBlocking) => Ok(Step::NeedsBlocking),
            // A gated write's text is made once it is committed (or refused).
            Ok(Step::NeedsGate(pending)) => Ok(Step::NeedsGate(pending.then(|_, outcome| match outcome {
                Ok(text) => Called::of(text, None, None),
                Err(failure) => Ok(Called::Ready(Ready::Value(tool_result(Err(failure))))),
            }))),
            Err(failure) => Ok(Step::Done(Called::Ready(Ready::Value(tool_result(Err(failure)))))),
        }
    };
    // The tool's operation, run as the file method starting the same one runs.
    let answer = run(&ctx, &ext, Op::of_tool(tool), Some(owner), work).await;
    match answer {
        // A tool's failures are results, a cancellation too.
        Err(err) if err.code() == filectx_protocol::error::REQUEST_CANCELLED => {
            Ok(Ready::Value(CallToolResult {
                content: vec![ToolContent::Text {
                    text: "The call was cancelled before it ran; nothing was read or changed.".to_owned(),
                }],
                is_error: true,
                error: Some(ToolError { name: "FsError".to_owned(), code: FsErrorCode::Aborted }),
            }))
        }
        Err(err) => Err(err),
        Ok(Called::Ready(ready)) => Ok(ready),
        // The change landed: what it introduced, waited for with nothing held.
        Ok(Called::Changed(mut text, path, version)) => {
            if let Some(said) = super::diagnostics::after_change_text(&ctx, &ext, &path, version).await {
                text.push('\n');
                text.push_str(&said);
            }
            Ok(Ready::Value(tool_result(Ok(text))))
        }
        Ok(Called::Diagnose(target)) => {
            let report = super::diagnostics::now(&ctx, &ext, &target).await;
            Ok(Ready::Value(tool_result(Ok(tools::render::diagnostics_now(
                &target.display,
                report.as_ref(),
            )))))
        }
    }
}

/// `file/read` (its response written once, its lines escaped straight into it: see
/// [`PreparedResponse`]).
pub async fn file_read(
    params: Params<'static>,
    ctx: Arc<ServerContext>,
    ext: Extensions,
) -> Result<Ready<ReadResult>, ErrorObjectOwned> {
    let params: ReadParams = parse_params(FILE_READ, &params)?;
    let request = window_of(&params, ctx.config.files.max_window_bytes)?;
    let owner = named_owner(&ext, params.owner.as_deref())?;
    let slot = PreparedResponse::of(&ext);
    run(&ctx, &ext, Op::Read, owner, move |files, _, how| {
        let Warm::Done(view) = files.read(&params.path, &request, how)? else {
            return Ok(Step::NeedsBlocking);
        };
        Ok(Step::Done(match &slot {
            Some(slot) => {
                let lines = &view.window.lines;
                let mut out = slot.start(256 + lines.text_len() + lines.text_len() / 32 + lines.len() * 4);
                read_result_json(&mut out, &view.display, &view.version.to_string(), &view.window);
                out.push(b'}');
                slot.put(out);
                Ready::Prepared
            }
            None => Ready::Value(read_result(view.display, view.version, view.window)),
        }))
    })
    .await
}

/// `file/write`.
pub async fn file_write(
    params: Params<'static>,
    ctx: Arc<ServerContext>,
    ext: Extensions,
) -> Result<WriteResult, ErrorObjectOwned> {
    let params: WriteParams = parse_params(FILE_WRITE, &params)?;
    let owner = named_owner(&ext, params.owner.as_deref())?;
    let (mut result, path, version) = run(&ctx, &ext, Op::Write, owner, move |files, _, how| {
        wire(files, files.write(&params.path, &params.content, how), |view| {
            (write_result(view.display, view.created, view.version), view.path, view.version)
        })
    })
    .await?;
    result.diagnostics = super::diagnostics::after_change_report(&ctx, &ext, &path, version).await;
    Ok(result)
}

/// `file/edit`.
pub async fn file_edit(
    params: Params<'static>,
    ctx: Arc<ServerContext>,
    ext: Extensions,
) -> Result<EditResult, ErrorObjectOwned> {
    let params: EditParams = parse_params(FILE_EDIT, &params)?;
    let owner = named_owner(&ext, params.owner.as_deref())?;
    let (mut result, path, version) = run(&ctx, &ext, Op::Edit, owner, move |files, _, how| {
        let change =
            Replacement::new(&params.old_string, &params.new_string, params.replace_all.unwrap_or(false))?;
        wire(files, files.edit(&params.path, &change, how), |view| {
            let (path, version) = (view.path.clone(), view.version);
            (edit_result(view), path, version)
        })
    })
    .await?;
    result.diagnostics = super::diagnostics::after_change_report(&ctx, &ext, &path, version).await;
    Ok(result)
}

/// `file/stat`.
pub async fn file_stat(
    params: Params<'static>,
    ctx: Arc<ServerContext>,
    ext: Extensions,
) -> Result<FileStatResult, ErrorObjectOwned> {
    let params: FileStatParams = parse_params(FILE_STAT, &params)?;
    let owner = named_owner(&ext, params.owner.as_deref())?;
    run(&ctx, &ext, Op::Stat, owner, move |files, _, _| {
        let view = files.stat(&params.path)?;
        Ok(Step::Done(FileStatResult {
            exists: view.kind != Kind::Missing,
            kind: file_kind(view.kind),
            fresh: view.fresh(),
            display_path: view.display,
            size: view.size,
            version: view.version.map(|v| v.to_string()),
            observed_version: view.observed.map(|v| v.to_string()),
        }))
    })
    .await
}

/// `fs/resolve`.
pub async fn fs_resolve(
    params: Params<'static>,
    ctx: Arc<ServerContext>,
    ext: Extensions,
) -> Result<ResolveResult, ErrorObjectOwned> {
    let params: PathParams = parse_params(FS_RESOLVE, &params)?;
    run(&ctx, &ext, Op::Stat, None, move |files, _, _| {
        let target = files.unrecorded().resolve(&params.path)?;
        Ok(Step::Done(ResolveResult {
            path: target.path.display().to_string(),
            display_path: target.display,
            exists: target.exists,
            root: target.dir.path().display().to_string(),
        }))
    })
    .await
}

/// `fs/stat`: the design's `FsInfo`, or null when nothing is there.
pub async fn fs_stat(
    params: Params<'static>,
    ctx: Arc<ServerContext>,
    ext: Extensions,
) -> Result<Option<FsInfo>, ErrorObjectOwned> {
    let params: PathParams = parse_params(FS_STAT, &params)?;
    run(&ctx, &ext, Op::Stat, None, move |files, _, _| {
        let (_, stat) = files.unrecorded().stat(&params.path)?;
        let kind = match stat.kind {
            Kind::Missing => return Ok(Step::Done(None)),
            Kind::File => FsType::File,
            Kind::Directory => FsType::Directory,
            Kind::Other => FsType::Other,
        };
        Ok(Step::Done(Some(FsInfo {
            version: stat.version.map(|v| v.to_string()),
            size: stat.size.filter(|_| kind == FsType::File),
            kind,
        })))
    })
    .await
}

/// `fs/readText`: a window, recording nothing.
pub async fn fs_read_text(
    params: Params<'static>,
    ctx: Arc<ServerContext>,
    ext: Extensions,
) -> Result<ReadResult, ErrorObjectOwned> {
    let params: ReadParams = parse_params(FS_READ_TEXT, &params)?;
    if params.owner.is_some() {
        return Err(invalid_params(
            "Invalid params for fs/readText: it records nothing, so it takes no `owner`",
        ));
    }
    if params.max_line_chars.is_some() {
        return Err(fs_error(
            FsErrorCode::InvalidArgument,
            "fs/readText returns whole lines and takes no maxLineChars; use file/read to cut long lines",
            Some(&params.path),
        ));
    }
    let request = window_of(&params, ctx.config.files.max_window_bytes)?;
    run(&ctx, &ext, Op::Read, None, move |files, _, how| {
        let Warm::Done(view) = files.unrecorded().read(&params.path, &request, how)? else {
            return Ok(Step::NeedsBlocking);
        };
        Ok(Step::Done(read_result(view.display, view.version, view.window)))
    })
    .await
}

/// `fs/writeText`: a write with an explicit expectation.
pub async fn fs_write_text(
    params: Params<'static>,
    ctx: Arc<ServerContext>,
    ext: Extensions,
) -> Result<WriteResult, ErrorObjectOwned> {
    let params: FsWriteParams = parse_params(FS_WRITE_TEXT, &params)?;
    run(&ctx, &ext, Op::Write, None, move |files, _, how| {
        let expect = match &params.expect {
            WriteExpectation::Any => RawExpectation::Any,
            WriteExpectation::CreateIfAbsent => RawExpectation::CreateIfAbsent,
            WriteExpectation::ReplaceIfVersion { version } => RawExpectation::ReplaceIfVersion(version),
        };
        let conventions =
            if params.keep_conventions.unwrap_or(false) { Conventions::Keep } else { Conventions::Exact };
        let written = files.unrecorded().write(&params.path, &params.content, expect, conventions, how);
        wire(files, written, |view| write_result(view.display, view.created, view.version))
    })
    .await
}

/// `fs/editText`: an edit against an explicit expected version.
pub async fn fs_edit_text(
    params: Params<'static>,
    ctx: Arc<ServerContext>,
    ext: Extensions,
) -> Result<EditResult, ErrorObjectOwned> {
    let params: FsEditParams = parse_params(FS_EDIT_TEXT, &params)?;
    run(&ctx, &ext, Op::Edit, None, move |files, _, how| {
        let change =
            Replacement::new(&params.old_string, &params.new_string, params.replace_all.unwrap_or(false))?;
        let edited = files.unrecorded().edit(&params.path, &change, &params.expected_version, how);
        wire(files, edited, edit_result)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::LineBuf;

    fn window(
        start_line: u64,
        lines: &[&str],
        total_lines: u64,
        truncated: Vec<u64>,
        capped: bool,
    ) -> Window {
        Window {
            start_line,
            lines: lines.iter().collect::<LineBuf>(),
            truncated,
            total_lines,
            capped,
            oversized: None,
        }
    }

    #[test]
    fn a_read_result_written_by_hand_is_what_serde_json_writes() {
        let nasty: String = (0u8..0x80).map(char::from).collect();
        // Lines about as long as the escaper's blocks, with something to escape at every place.
        let long: Vec<String> = (0..140)
            .map(|i| format!("{}{}{}", "x".repeat(i / 2), ["\"", "é", "\t", ""][i % 4], "y".repeat(i / 2)))
            .collect();
        let long: Vec<&str> = long.iter().map(String::as_str).collect();
        let windows = [
            window(1, &long, 140, vec![], false),
            window(1, &["fn main() {", "\tprintln!(\"hi\");", "}"], 3, vec![], false),
            window(5, &["é日✓", "", &nasty, "\u{FFFD}"], 100, vec![6, 8], true),
            window(1, &[], 0, vec![], false),
            window(2, &["last"], 2, vec![], false),
        ];
        for (i, window) in windows.into_iter().enumerate() {
            let (display, version) = ("src/\"odd\"\\name.rs", Version::of(b"x"));
            let mut ours = Vec::new();
            read_result_json(&mut ours, display, &version.to_string(), &window);
            let theirs = serde_json::to_vec(&read_result(display.to_owned(), version, window)).unwrap();
            assert_eq!(String::from_utf8(ours).unwrap(), String::from_utf8(theirs).unwrap(), "window {i}");
        }
    }

    #[test]
    fn a_tool_text_written_by_hand_is_what_serde_json_writes() {
        let text = "1\tfn \"x\"\n\n(End of file - total 1 lines)";
        let mut ours = Vec::new();
        tool_text_json(&mut ours, |out| crate::json::escape_into(out, text));
        let theirs = serde_json::to_vec(&tool_result(Ok(text.to_owned()))).unwrap();
        assert_eq!(String::from_utf8(ours).unwrap(), String::from_utf8(theirs).unwrap());
    }
}
