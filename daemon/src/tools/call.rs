//! `tools/call`: argument validation against each tool's schema, dispatch to the file context,
//! and the text the model sees. Every failure, invalid arguments included, is a [`Failure`]
//! with a text the model can act on (the rpc layer turns it into an `isError` result).

use std::num::NonZeroU64;

use filectx_protocol::tools::{
    ArgumentError, DiagnosticsArgs, EditArgs, GlobArgs, GrepArgs, GrepOutputMode, READ_LINE_LIMIT, ReadArgs,
    ToolArguments, UndoArgs, WriteArgs,
};
use filectx_protocol::{StaleEdits, ToolName};
use serde_json::Value;

use super::search::{self, GrepRequest, SearchError};
use super::{dedup, render};
use crate::context::{
    ContextError, Diagnosed, FileContext, How, InvalidEdit, Pending, ReadView, Replacement, Step, Version,
    Warm, WarmRead,
};
use crate::search::{GrepMode, GrepSpec};
use crate::session::SessionOptions;
use crate::session::owners::Delivered;

/// The tool is not one this session has.
#[derive(Debug, thiserror::Error)]
#[error("unknown tool {name:?}; this session's tools are: {available}")]
pub struct UnknownTool {
    /// The name asked for.
    pub name: String,
    /// The session's tools, comma-separated.
    pub available: String,
}

/// A failed tool call: the text the model sees, and why (for the structured error).
#[derive(Debug)]
pub struct Failure {
    /// What went wrong and what to do next, for the model.
    pub text: String,
    /// The typed cause.
    pub cause: Cause,
}

/// Why a tool call failed.
#[derive(Debug)]
pub enum Cause {
    /// The arguments do not fit the tool's schema or rules.
    InvalidArgument,
    /// The file context refused or failed.
    File(ContextError),
}

/// A successful tool call's text for the model.
#[derive(Debug, PartialEq, Eq)]
pub enum Text {
    /// The text, for the caller to serialize.
    Plain(String),
    /// The text is written, JSON-escaped (the inside of a JSON string), at the end of the
    /// buffer the caller gave [`call`].
    Written,
    /// The text of a change that landed, to which the caller adds what the change introduced
    /// (the diagnostics of the version written, waited for with nothing held).
    Changed {
        /// The text so far.
        text: String,
        /// The file, canonical.
        path: std::path::PathBuf,
        /// The version written.
        version: Version,
    },
    /// The `diagnostics` tool: the file to ask its language server about (the caller waits for
    /// the answer and renders it with [`render::diagnostics_now`]).
    Diagnose(Diagnosed),
}

impl Text {
    /// The text of a change of `path` at `version`.
    fn changed(text: String, path: std::path::PathBuf, version: Version) -> Self {
        Self::Changed { text, path, version }
    }
}

/// What a tool call answers: the model's text, or what it needs first (the blocking pool, or
/// the gates' answer to a write or edit, after which the text is made), or a failure.
pub type Outcome = Result<Step<Text, Failure>, Failure>;

/// Argument problems, phrased for a model.
struct Invalid(String);

impl From<ArgumentError> for Invalid {
    fn from(err: ArgumentError) -> Self {
        Self(err.to_string())
    }
}

fn searched(result: Result<String, SearchError>, name: &str) -> Result<Outcome, Invalid> {
    match result {
        Ok(text) => Ok(Ok(Step::Done(Text::Plain(text)))),
        Err(SearchError::Invalid(text)) => Err(Invalid(text)),
        Err(SearchError::File(err)) => {
            Ok(Err(Failure { text: render::error(&err, name), cause: Cause::File(err) }))
        }
    }
}

/// A tool call's arguments, read into their tool's type.
enum Parsed<'a> {
    Read(ReadArgs<'a>),
    Write(WriteArgs<'a>),
    Edit(EditArgs<'a>),
    Glob(GlobArgs<'a>),
    Grep(GrepArgs<'a>),
    Undo(UndoArgs<'a>),
    Diagnostics(DiagnosticsArgs<'a>),
}

/// The arguments of a `tool` call read into its type, or the text saying what does not fit
/// its schema.
fn parse(tool: ToolName, args: &Value) -> Result<Parsed<'_>, Invalid> {
    Ok(match tool {
        ToolName::Read => Parsed::Read(arguments(args)?),
        ToolName::Write => Parsed::Write(arguments(args)?),
        ToolName::Edit => Parsed::Edit(arguments(args)?),
        ToolName::Glob => Parsed::Glob(arguments(args)?),
        ToolName::Grep => Parsed::Grep(arguments(args)?),
        ToolName::Undo => Parsed::Undo(arguments(args)?),
        ToolName::Diagnostics => Parsed::Diagnostics(arguments(args)?),
    })
}

/// A tool call's arguments, checked: what the file context is asked.
#[derive(Debug)]
enum Args<'a> {
    Read { path: &'a str, offset: u64, asked: Option<u64> },
    Write { path: &'a str, content: &'a str },
    Edit { path: &'a str, change: Replacement<'a> },
    Glob { pattern: &'a str, path: Option<&'a str> },
    Grep(GrepRequest<'a>),
    Undo { path: &'a str },
    Diagnostics { path: &'a str },
}

/// What the parsed arguments ask, checked against the rules a schema cannot state (an edit's
/// strings), or the text saying which is broken. `budget` is the session's output budget (a
/// grep's).
fn checked<'a>(parsed: &'a Parsed<'_>, budget: u64, escaped: bool) -> Result<Args<'a>, Invalid> {
    Ok(match parsed {
        Parsed::Read(read) => Args::Read {
            path: &read.file_path,
            offset: read.offset.map_or(1, NonZeroU64::get),
            asked: read.limit.map(NonZeroU64::get),
        },
        Parsed::Write(write) => Args::Write { path: &write.file_path, content: &write.content },
        Parsed::Edit(edit) => {
            let all = edit.replace_all.unwrap_or(false);
            let change = Replacement::new(&edit.old_string, &edit.new_string, all).map_err(|why| match why {
                InvalidEdit::Empty => {
                    Invalid("old_string must not be empty; to create a file, use write.".into())
                }
                InvalidEdit::Identical => {
                    Invalid("old_string and new_string are identical: there is nothing to change.".into())
                }
                InvalidEdit::Nul(at) => Invalid(format!(
                    "new_string has a NUL byte (\\0) at {at}: files are text. Remove it and retry the edit."
                )),
            })?;
            Args::Edit { path: &edit.file_path, change }
        }
        Parsed::Glob(glob) => Args::Glob { pattern: &glob.pattern, path: glob.path.as_deref() },
        Parsed::Undo(undo) => Args::Undo { path: &undo.file_path },
        Parsed::Diagnostics(diagnostics) => Args::Diagnostics { path: &diagnostics.file_path },
        Parsed::Grep(grep) => Args::Grep(GrepRequest {
            spec: GrepSpec {
                pattern: &grep.pattern,
                glob: grep.glob.as_deref(),
                file_type: grep.file_type.as_deref(),
                mode: match grep.output_mode.unwrap_or(GrepOutputMode::FilesWithMatches) {
                    GrepOutputMode::FilesWithMatches => GrepMode::FilesWithMatches,
                    GrepOutputMode::Count => GrepMode::Count,
                    GrepOutputMode::Content => GrepMode::Content,
                },
                case_insensitive: grep.case_insensitive.unwrap_or(false),
                context: usize::try_from(grep.context.unwrap_or(0).min(100)).unwrap_or(100),
                multiline: grep.multiline.unwrap_or(false),
            },
            path: grep.path.as_deref(),
            head_limit: grep.head_limit.map(NonZeroU64::get),
            offset: grep.offset.unwrap_or(0),
            budget,
            escaped,
        }),
    })
}

/// `args` read as `T`.
fn arguments<'a, T: ToolArguments<'a>>(args: &'a Value) -> Result<T, Invalid> {
    Ok(filectx_protocol::tools::parse(args)?)
}

fn run(
    ctx: &FileContext<'_>,
    options: &SessionOptions,
    (tool, args): (ToolName, &Value),
    how: How<'_>,
    delivered: Option<&Delivered>,
    limits: &crate::search::SearchLimits<'_>,
    json: Option<&mut Vec<u8>>,
) -> Result<Outcome, Invalid> {
    let name = tool.as_str();
    let parsed = parse(tool, args)?;
    let (outcome, file_path) = match checked(&parsed, options.read_max_bytes, options.json_budget)? {
        Args::Read { path, offset, asked } => {
            let most = u64::from(READ_LINE_LIMIT);
            let request =
                render::read_request(offset, asked.unwrap_or(most).min(most), options.read_max_bytes);
            let capped = asked.is_some_and(|n| n > most);
            let budget = options.json_budget.then_some(options.read_max_bytes);
            let outcome = ctx.read(path, &request, how).map_warm(|mut view| {
                if let Some(budget) = budget {
                    render::fit_json(&mut view.window, budget);
                }
                match json {
                    // Projected and escaped in one pass, straight into the caller's response.
                    Some(out) => {
                        let start = out.len();
                        let len = render::read_json(&view, capped, out);
                        match dedup::answer_json(delivered, &view, &out[start..], len) {
                            None => Text::Written,
                            Some(short) => {
                                out.truncate(start);
                                Text::Plain(short)
                            }
                        }
                    }
                    None => Text::Plain(dedup::answer(delivered, &view, render::read(&view, capped))),
                }
            });
            (outcome, path)
        }
        Args::Write { path, content } => (
            ctx.write(path, content, how)
                .map(|step| step.map(|view| Text::changed(render::write(&view), view.path, view.version))),
            path,
        ),
        Args::Edit { path, change } => {
            let outcome = match options.stale_edits {
                StaleEdits::Refuse => ctx
                    .edit(path, &change, how)
                    .map(|step| step.map(|view| Text::changed(render::edit(&view), view.path, view.version))),
                StaleEdits::Merge => ctx.edit_merging(path, &change, how).map(|step| {
                    step.map(|merged| {
                        let text = match &merged.outside {
                            Some(outside) => render::edit_over(&merged.edit, outside),
                            None => render::edit(&merged.edit),
                        };
                        Text::changed(text, merged.edit.path, merged.edit.version)
                    })
                }),
            };
            (outcome, path)
        }
        Args::Glob { pattern, path } => {
            let budget = (options.read_max_bytes, options.json_budget);
            return searched(search::glob(ctx, pattern, path, budget, limits), name);
        }
        Args::Grep(request) => return searched(search::grep(ctx, &request, limits), name),
        Args::Undo { path } => (
            ctx.undo(path, how).map(|step| {
                step.map(|view| match view.restore.version {
                    Some(version) => Text::changed(render::undo(&view), view.restore.path.clone(), version),
                    None => Text::Plain(render::undo(&view)),
                })
            }),
            path,
        ),
        Args::Diagnostics { path } => {
            (ctx.diagnosed(path).map(|target| Step::Done(Text::Diagnose(target))), path)
        }
    };
    let budget = options.read_max_bytes;
    Ok(match outcome {
        Ok(Step::NeedsGate(pending)) => {
            Ok(Step::NeedsGate(later(pending, tool, file_path.to_owned(), budget)))
        }
        Ok(Step::Done(text)) => Ok(Step::Done(text)),
        Ok(Step::NeedsBlocking) => Ok(Step::NeedsBlocking),
        Err(err) => match unread(ctx, tool, file_path, budget, &err, how) {
            Shown::NeedsBlocking => Ok(Step::NeedsBlocking),
            shown => failed_as(tool, shown, Err(err)).map(Step::Done),
        },
    })
}

/// The answer of a write or edit of `file_path` that waits for the gates, made (as [`failed`]
/// makes it) once it is committed or refused.
#[allow(clippy::result_large_err, reason = "a failure is a result here, as in `Outcome`")]
fn later(pending: Pending<Text>, tool: ToolName, file_path: String, budget: u64) -> Pending<Text, Failure> {
    pending.then(move |ctx, outcome| failed(ctx, tool, &file_path, budget, outcome))
}

/// A tool's `outcome` with its failure as the model is told it: a write or edit of `file_path`
/// refused as not read shows the file when it is small (see [`unread_shown`]).
#[allow(clippy::result_large_err, reason = "a failure is a result here, as in `Outcome`")]
fn failed(
    ctx: &FileContext<'_>,
    tool: ToolName,
    file_path: &str,
    budget: u64,
    outcome: Result<Text, ContextError>,
) -> Result<Text, Failure> {
    let shown = match &outcome {
        // Its change was committed or refused on the pool.
        Err(err) => unread(ctx, tool, file_path, budget, err, How::POOL),
        Ok(_) => Shown::No,
    };
    failed_as(tool, shown, outcome)
}

/// What a refusal of `tool` shows of the file it was refused for.
enum Shown {
    /// The file, refused as not read and small: read now (see [`unread_shown`]).
    File(ReadView),
    /// Nothing.
    No,
    /// The file, once read on the blocking pool (the call was tried at once): nothing was read.
    NeedsBlocking,
}

/// What a write or edit refused with `err` as not read shows of `file_path`.
fn unread(
    ctx: &FileContext<'_>,
    tool: ToolName,
    file_path: &str,
    budget: u64,
    err: &ContextError,
    how: How<'_>,
) -> Shown {
    match (err, tool) {
        (ContextError::NotObserved { .. }, ToolName::Write | ToolName::Edit) => {
            unread_shown(ctx, file_path, budget, how)
        }
        _ => Shown::No,
    }
}

/// [`failed`], given what it shows.
#[allow(clippy::result_large_err, reason = "a failure is a result here, as in `Outcome`")]
fn failed_as(tool: ToolName, shown: Shown, outcome: Result<Text, ContextError>) -> Result<Text, Failure> {
    let name = tool.as_str();
    let text = |err: &ContextError| match &shown {
        Shown::File(view) => render::not_read_shown(name, view),
        Shown::No | Shown::NeedsBlocking => render::error(err, name),
    };
    outcome.map_err(|err| Failure { text: text(&err), cause: Cause::File(err) })
}

/// The most lines of an unread file a refused write or edit shows (as a stale refusal's diff).
const UNREAD_SHOWN_LINES: u64 = 200;
/// The most bytes of that text (as a stale refusal's diff), within the session's read budget.
const UNREAD_SHOWN_BYTES: u64 = 16 * 1024;

/// A file that a write or edit tool call was refused for, as not read in this session, read
/// whole when it is small ([`UNREAD_SHOWN_LINES`], [`UNREAD_SHOWN_BYTES`], no line cut): its
/// read projection, recorded for the session as a read is, so that a retry that still fits goes
/// ahead without a turn spent reading. `None` (nothing recorded; the refusal asks for a read)
/// when it is larger, not text, or cannot be read.
fn unread_shown(ctx: &FileContext<'_>, path: &str, budget: u64, how: How<'_>) -> Shown {
    let request = render::read_request(1, UNREAD_SHOWN_LINES, budget.min(UNREAD_SHOWN_BYTES));
    match ctx.read_if_whole(path, &request, how) {
        Ok(Warm::Done(Some(view))) => Shown::File(view),
        Ok(Warm::NeedsBlocking) => Shown::NeedsBlocking,
        Ok(Warm::Done(None)) | Err(_) => Shown::No,
    }
}

/// The tool `name` names, when it is one of this session's: the one place a tool call's name is
/// read (the runner picks how the call runs from it).
pub fn tool(options: &SessionOptions, name: &str) -> Result<ToolName, UnknownTool> {
    let tools = &options.tools;
    ToolName::from_name(name).filter(|t| tools.contains(t)).ok_or_else(|| UnknownTool {
        name: name.to_owned(),
        available: tools.iter().map(|t| t.as_str()).collect::<Vec<_>>().join(", "),
    })
}

/// Calls `tool` (one of this session's: see [`tool`]) with `args`, run as `how` says: on the pool it blocks
/// (it reads and writes files); at once ([`How::AtOnce`]) what cannot be done at once answers
/// [`Step::NeedsBlocking`] having done nothing. With `delivered`
/// (the owner's dedup record, when the session asked for `dedupReads`), a read of lines this
/// owner already received unchanged answers one short line (see [`dedup`]). `limits` bound a
/// search (`glob`, `grep`) and say when its request was cancelled: it then fails as cancelled,
/// and at its time limit it answers what it found.
/// With `json` (a buffer holding the caller's response up to the opening quote of the text), a
/// successful read writes its text there JSON-escaped and answers [`Text::Written`]; every
/// other answer is [`Text::Plain`] and leaves the buffer as it was.
#[allow(clippy::result_large_err, reason = "a failure is a result here, as in `Outcome`")]
pub fn call(
    ctx: &FileContext<'_>,
    options: &SessionOptions,
    (tool, args): (ToolName, &Value),
    how: How<'_>,
    delivered: Option<&Delivered>,
    limits: &crate::search::SearchLimits<'_>,
    json: Option<&mut Vec<u8>>,
) -> Outcome {
    match run(ctx, options, (tool, args), how, delivered, limits, json) {
        Ok(result) => result,
        Err(Invalid(text)) => Err(Failure { text, cause: Cause::InvalidArgument }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What a call with these arguments is asked, or the text the model sees instead.
    fn parsed(tool: ToolName, args: &Value) -> String {
        match parse(tool, args)
            .and_then(|parsed| checked(&parsed, 1024, false).map(|args| format!("ok {args:?}")))
        {
            Ok(text) | Err(Invalid(text)) => text,
        }
    }

    /// The text of every kind of bad argument, and what good ones become, byte for byte (the
    /// texts a model acts on; captured from the hand-written parser this one replaced).
    #[test]
    fn each_bad_argument_has_its_text() {
        let cases: Vec<(ToolName, Value)> = vec![
            (ToolName::Read, json!(null)),
            (ToolName::Read, json!([])),
            (ToolName::Read, json!("a.txt")),
            (ToolName::Read, json!({})),
            (ToolName::Read, json!({"file_path": "a", "bogus": 1})),
            (ToolName::Read, json!({"zz": 1, "aa": 2, "file_path": "a"})),
            (ToolName::Read, json!({"bogus": 1})),
            (ToolName::Read, json!({"file_path": null})),
            (ToolName::Read, json!({"file_path": 5})),
            (ToolName::Read, json!({"file_path": true})),
            (ToolName::Read, json!({"file_path": []})),
            (ToolName::Read, json!({"file_path": {}})),
            (ToolName::Read, json!({"file_path": 5, "offset": 0})),
            (ToolName::Read, json!({"file_path": "a", "offset": 0})),
            (ToolName::Read, json!({"file_path": "a", "offset": -1})),
            (ToolName::Read, json!({"file_path": "a", "offset": 1.5})),
            (ToolName::Read, json!({"file_path": "a", "offset": 2.0})),
            (ToolName::Read, json!({"file_path": "a", "offset": "5"})),
            (ToolName::Read, json!({"file_path": "a", "offset": [1]})),
            (ToolName::Read, json!({"file_path": "a", "offset": 0, "limit": 0})),
            (ToolName::Read, json!({"file_path": "a", "limit": 0})),
            (ToolName::Read, json!({"file_path": "a", "limit": true})),
            (ToolName::Read, json!({"offset": 0})),
            (ToolName::Read, json!({"file_path": "a", "offset": null, "limit": null})),
            (ToolName::Read, json!({"file_path": "a", "offset": 3, "limit": 5000})),
            (ToolName::Read, json!({"file_path": "a", "offset": u64::MAX, "limit": 1})),
            (ToolName::Write, json!(1)),
            (ToolName::Write, json!({})),
            (ToolName::Write, json!({"file_path": "a"})),
            (ToolName::Write, json!({"content": "x"})),
            (ToolName::Write, json!({"file_path": "a", "content": null})),
            (ToolName::Write, json!({"file_path": "a", "content": 1})),
            (ToolName::Write, json!({"file_path": "a", "content": "x", "mode": "w"})),
            (ToolName::Write, json!({"file_path": "a", "content": ""})),
            (ToolName::Edit, json!(false)),
            (ToolName::Edit, json!({})),
            (ToolName::Edit, json!({"file_path": "a"})),
            (ToolName::Edit, json!({"file_path": "a", "old_string": "x"})),
            (ToolName::Edit, json!({"file_path": "a", "new_string": "x"})),
            (ToolName::Edit, json!({"file_path": "a", "old_string": 1, "new_string": "x"})),
            (ToolName::Edit, json!({"file_path": "a", "old_string": "x", "new_string": 1})),
            (
                ToolName::Edit,
                json!({"file_path": "a", "old_string": "x", "new_string": "y", "replace_all": "yes"}),
            ),
            (
                ToolName::Edit,
                json!({"file_path": "a", "old_string": "x", "new_string": "y", "replace_all": 1}),
            ),
            (
                ToolName::Edit,
                json!({"file_path": "a", "old_string": "x", "new_string": "y", "replace_all": null}),
            ),
            (
                ToolName::Edit,
                json!({"file_path": "a", "old_string": "x", "new_string": "y", "replace_all": true}),
            ),
            (ToolName::Edit, json!({"file_path": "a", "old_string": "", "new_string": "y"})),
            (ToolName::Edit, json!({"file_path": "a", "old_string": "", "new_string": ""})),
            (ToolName::Edit, json!({"file_path": "a", "old_string": "x", "new_string": "x"})),
            (ToolName::Edit, json!({"file_path": "a", "old_string": "x", "new_string": "a\nb\0c"})),
            (
                ToolName::Edit,
                json!({"file_path": "a", "old_string": "", "new_string": "y", "replace_all": 0}),
            ),
            (ToolName::Edit, json!({"file_path": 1, "old_string": "", "new_string": "y", "x": 0})),
            (ToolName::Glob, json!([1])),
            (ToolName::Glob, json!({})),
            (ToolName::Glob, json!({"pattern": ""})),
            (ToolName::Glob, json!({"pattern": "*.rs", "path": null})),
            (ToolName::Glob, json!({"pattern": "*.rs", "path": 1})),
            (ToolName::Glob, json!({"pattern": 1, "path": 1})),
            (ToolName::Glob, json!({"pattern": "*.rs", "path": "src", "type": "rust"})),
            (ToolName::Grep, json!(null)),
            (ToolName::Grep, json!({})),
            (ToolName::Grep, json!({"pattern": ""})),
            (ToolName::Grep, json!({"pattern": "", "path": 1})),
            (ToolName::Grep, json!({"pattern": 1})),
            (ToolName::Grep, json!({"pattern": "x", "output_mode": "lines"})),
            (ToolName::Grep, json!({"pattern": "x", "output_mode": 1})),
            (ToolName::Grep, json!({"pattern": "x", "output_mode": null})),
            (ToolName::Grep, json!({"output_mode": "lines"})),
            (ToolName::Grep, json!({"output_mode": "content"})),
            (ToolName::Grep, json!({"pattern": 1, "output_mode": "lines"})),
            (ToolName::Grep, json!({"pattern": "", "output_mode": "lines"})),
            (ToolName::Grep, json!({"pattern": "x", "path": 1, "glob": 1})),
            (ToolName::Grep, json!({"pattern": "x", "glob": 1})),
            (ToolName::Grep, json!({"pattern": "x", "type": 1})),
            (ToolName::Grep, json!({"pattern": "x", "case_insensitive": "no"})),
            (ToolName::Grep, json!({"pattern": "x", "context": -1})),
            (ToolName::Grep, json!({"pattern": "x", "context": 1.5})),
            (ToolName::Grep, json!({"pattern": "x", "context": 1000})),
            (ToolName::Grep, json!({"pattern": "x", "context": null, "offset": null, "head_limit": null})),
            (ToolName::Grep, json!({"pattern": "x", "multiline": 1})),
            (ToolName::Grep, json!({"pattern": "x", "head_limit": 0})),
            (ToolName::Grep, json!({"pattern": "x", "offset": -1})),
            (ToolName::Grep, json!({"pattern": "x", "offset": 0, "head_limit": 0, "context": -1})),
            (ToolName::Grep, json!({"pattern": "x", "case_insensitive": 1, "multiline": 1})),
            (ToolName::Grep, json!({"pattern": "x", "-i": true})),
            (
                ToolName::Grep,
                json!({"pattern": "x", "path": "src", "glob": "*.rs", "type": "rust", "output_mode": "content",
                       "case_insensitive": true, "context": 2, "multiline": true, "head_limit": 3, "offset": 4}),
            ),
            (ToolName::Grep, json!({"pattern": "x", "output_mode": "count"})),
        ];
        let text: String =
            cases.iter().map(|(tool, args)| format!("{tool} {args} => {}\n", parsed(*tool, args))).collect();
        expect_test::expect![[r#"
            read null => The read tool's arguments must be a JSON object with file_path, offset, limit.
            read [] => The read tool's arguments must be a JSON object with file_path, offset, limit.
            read "a.txt" => The read tool's arguments must be a JSON object with file_path, offset, limit.
            read {} => file_path is required.
            read {"bogus":1,"file_path":"a"} => Unknown argument "bogus" for the read tool; its arguments are: file_path, offset, limit.
            read {"aa":2,"file_path":"a","zz":1} => Unknown argument "aa" for the read tool; its arguments are: file_path, offset, limit.
            read {"bogus":1} => Unknown argument "bogus" for the read tool; its arguments are: file_path, offset, limit.
            read {"file_path":null} => file_path must be a string, not null.
            read {"file_path":5} => file_path must be a string, not a number.
            read {"file_path":true} => file_path must be a string, not a boolean.
            read {"file_path":[]} => file_path must be a string, not an array.
            read {"file_path":{}} => file_path must be a string, not an object.
            read {"file_path":5,"offset":0} => file_path must be a string, not a number.
            read {"file_path":"a","offset":0} => offset must be an integer of at least 1, not 0.
            read {"file_path":"a","offset":-1} => offset must be an integer of at least 1, not -1.
            read {"file_path":"a","offset":1.5} => offset must be an integer of at least 1, not 1.5.
            read {"file_path":"a","offset":2.0} => offset must be an integer of at least 1, not 2.0.
            read {"file_path":"a","offset":"5"} => offset must be an integer of at least 1, not "5".
            read {"file_path":"a","offset":[1]} => offset must be an integer of at least 1, not [1].
            read {"file_path":"a","limit":0,"offset":0} => offset must be an integer of at least 1, not 0.
            read {"file_path":"a","limit":0} => limit must be an integer of at least 1, not 0.
            read {"file_path":"a","limit":true} => limit must be an integer of at least 1, not true.
            read {"offset":0} => file_path is required.
            read {"file_path":"a","limit":null,"offset":null} => ok Read { path: "a", offset: 1, asked: None }
            read {"file_path":"a","limit":5000,"offset":3} => ok Read { path: "a", offset: 3, asked: Some(5000) }
            read {"file_path":"a","limit":1,"offset":18446744073709551615} => ok Read { path: "a", offset: 18446744073709551615, asked: Some(1) }
            write 1 => The write tool's arguments must be a JSON object with file_path, content.
            write {} => file_path is required.
            write {"file_path":"a"} => content is required.
            write {"content":"x"} => file_path is required.
            write {"content":null,"file_path":"a"} => content must be a string, not null.
            write {"content":1,"file_path":"a"} => content must be a string, not a number.
            write {"content":"x","file_path":"a","mode":"w"} => Unknown argument "mode" for the write tool; its arguments are: file_path, content.
            write {"content":"","file_path":"a"} => ok Write { path: "a", content: "" }
            edit false => The edit tool's arguments must be a JSON object with file_path, old_string, new_string, replace_all.
            edit {} => file_path is required.
            edit {"file_path":"a"} => old_string is required.
            edit {"file_path":"a","old_string":"x"} => new_string is required.
            edit {"file_path":"a","new_string":"x"} => old_string is required.
            edit {"file_path":"a","new_string":"x","old_string":1} => old_string must be a string, not a number.
            edit {"file_path":"a","new_string":1,"old_string":"x"} => new_string must be a string, not a number.
            edit {"file_path":"a","new_string":"y","old_string":"x","replace_all":"yes"} => replace_all must be true or false, not a string.
            edit {"file_path":"a","new_string":"y","old_string":"x","replace_all":1} => replace_all must be true or false, not a number.
            edit {"file_path":"a","new_string":"y","old_string":"x","replace_all":null} => ok Edit { path: "a", change: Replacement { old: "x", new: "y", all: false } }
            edit {"file_path":"a","new_string":"y","old_string":"x","replace_all":true} => ok Edit { path: "a", change: Replacement { old: "x", new: "y", all: true } }
            edit {"file_path":"a","new_string":"y","old_string":""} => old_string must not be empty; to create a file, use write.
            edit {"file_path":"a","new_string":"","old_string":""} => old_string must not be empty; to create a file, use write.
            edit {"file_path":"a","new_string":"x","old_string":"x"} => old_string and new_string are identical: there is nothing to change.
            edit {"file_path":"a","new_string":"a\nb\u0000c","old_string":"x"} => new_string has a NUL byte (\0) at line 2, column 2 (byte offset 3): files are text. Remove it and retry the edit.
            edit {"file_path":"a","new_string":"y","old_string":"","replace_all":0} => replace_all must be true or false, not a number.
            edit {"file_path":1,"new_string":"y","old_string":"","x":0} => Unknown argument "x" for the edit tool; its arguments are: file_path, old_string, new_string, replace_all.
            glob [1] => The glob tool's arguments must be a JSON object with pattern, path.
            glob {} => pattern is required.
            glob {"pattern":""} => ok Glob { pattern: "", path: None }
            glob {"path":null,"pattern":"*.rs"} => ok Glob { pattern: "*.rs", path: None }
            glob {"path":1,"pattern":"*.rs"} => path must be a string, not a number.
            glob {"path":1,"pattern":1} => pattern must be a string, not a number.
            glob {"path":"src","pattern":"*.rs","type":"rust"} => Unknown argument "type" for the glob tool; its arguments are: pattern, path.
            grep null => The grep tool's arguments must be a JSON object with pattern, path, glob, type, output_mode, case_insensitive, context, multiline, head_limit, offset.
            grep {} => pattern is required.
            grep {"pattern":""} => pattern must not be empty.
            grep {"path":1,"pattern":""} => pattern must not be empty.
            grep {"pattern":1} => pattern must be a string, not a number.
            grep {"output_mode":"lines","pattern":"x"} => output_mode must be files_with_matches, content or count, not "lines".
            grep {"output_mode":1,"pattern":"x"} => output_mode must be a string, not a number.
            grep {"output_mode":null,"pattern":"x"} => ok Grep(GrepRequest { spec: GrepSpec { pattern: "x", glob: None, file_type: None, mode: FilesWithMatches, case_insensitive: false, context: 0, multiline: false }, path: None, head_limit: None, offset: 0, budget: 1024, escaped: false })
            grep {"output_mode":"lines"} => output_mode must be files_with_matches, content or count, not "lines".
            grep {"output_mode":"content"} => pattern is required.
            grep {"output_mode":"lines","pattern":1} => output_mode must be files_with_matches, content or count, not "lines".
            grep {"output_mode":"lines","pattern":""} => output_mode must be files_with_matches, content or count, not "lines".
            grep {"glob":1,"path":1,"pattern":"x"} => path must be a string, not a number.
            grep {"glob":1,"pattern":"x"} => glob must be a string, not a number.
            grep {"pattern":"x","type":1} => type must be a string, not a number.
            grep {"case_insensitive":"no","pattern":"x"} => case_insensitive must be true or false, not a string.
            grep {"context":-1,"pattern":"x"} => context must be an integer of at least 0, not -1.
            grep {"context":1.5,"pattern":"x"} => context must be an integer of at least 0, not 1.5.
            grep {"context":1000,"pattern":"x"} => ok Grep(GrepRequest { spec: GrepSpec { pattern: "x", glob: None, file_type: None, mode: FilesWithMatches, case_insensitive: false, context: 100, multiline: false }, path: None, head_limit: None, offset: 0, budget: 1024, escaped: false })
            grep {"context":null,"head_limit":null,"offset":null,"pattern":"x"} => ok Grep(GrepRequest { spec: GrepSpec { pattern: "x", glob: None, file_type: None, mode: FilesWithMatches, case_insensitive: false, context: 0, multiline: false }, path: None, head_limit: None, offset: 0, budget: 1024, escaped: false })
            grep {"multiline":1,"pattern":"x"} => multiline must be true or false, not a number.
            grep {"head_limit":0,"pattern":"x"} => head_limit must be an integer of at least 1, not 0.
            grep {"offset":-1,"pattern":"x"} => offset must be an integer of at least 0, not -1.
            grep {"context":-1,"head_limit":0,"offset":0,"pattern":"x"} => context must be an integer of at least 0, not -1.
            grep {"case_insensitive":1,"multiline":1,"pattern":"x"} => case_insensitive must be true or false, not a number.
            grep {"-i":true,"pattern":"x"} => Unknown argument "-i" for the grep tool; its arguments are: pattern, path, glob, type, output_mode, case_insensitive, context, multiline, head_limit, offset.
            grep {"case_insensitive":true,"context":2,"glob":"*.rs","head_limit":3,"multiline":true,"offset":4,"output_mode":"content","path":"src","pattern":"x","type":"rust"} => ok Grep(GrepRequest { spec: GrepSpec { pattern: "x", glob: Some("*.rs"), file_type: Some("rust"), mode: Content, case_insensitive: true, context: 2, multiline: true }, path: Some("src"), head_limit: Some(3), offset: 4, budget: 1024, escaped: false })
            grep {"output_mode":"count","pattern":"x"} => ok Grep(GrepRequest { spec: GrepSpec { pattern: "x", glob: None, file_type: None, mode: Count, case_insensitive: false, context: 0, multiline: false }, path: None, head_limit: None, offset: 0, budget: 1024, escaped: false })
        "#]].assert_eq(&text);
    }
}
