//! `tools/call`: argument validation against each tool's schema, dispatch to the file context,
//! and the text the model sees. Every failure, invalid arguments included, is a [`Failure`]
//! with a text the model can act on (the rpc layer turns it into an `isError` result).

use filectx_protocol::tools::READ_LINE_LIMIT;
use filectx_protocol::{StaleEdits, ToolName};
use serde_json::{Map, Value};

use super::search::{self, GrepRequest, Mode, SearchError};
use super::{dedup, render};
use crate::context::{
    ContextError, FileContext, InvalidEdit, Pending, ReadView, Replacement, Step, WarmRead,
};
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
}

/// What a tool call answers: the model's text, or what it needs first (the blocking pool, or
/// the gates' answer to a write or edit, after which the text is made), or a failure.
pub type Outcome = Result<Step<Text, Failure>, Failure>;

/// Argument problems, phrased for a model.
struct Invalid(String);

/// The arguments object, checked for unknown fields.
fn fields<'a>(tool: ToolName, args: &'a Value, allowed: &[&str]) -> Result<&'a Map<String, Value>, Invalid> {
    let Some(map) = args.as_object() else {
        return Err(Invalid(format!(
            "The {tool} tool's arguments must be a JSON object with {}.",
            allowed.join(", ")
        )));
    };
    if let Some(unknown) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(Invalid(format!(
            "Unknown argument {unknown:?} for the {tool} tool; its arguments are: {}.",
            allowed.join(", ")
        )));
    }
    Ok(map)
}

fn string<'a>(map: &'a Map<String, Value>, key: &str) -> Result<&'a str, Invalid> {
    match map.get(key) {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(Invalid(format!("{key} must be a string, not {}.", kind(other)))),
        None => Err(Invalid(format!("{key} is required."))),
    }
}

fn positive(map: &Map<String, Value>, key: &str) -> Result<Option<u64>, Invalid> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => match value.as_u64() {
            Some(n) if n >= 1 => Ok(Some(n)),
            _ => Err(Invalid(format!("{key} must be an integer of at least 1, not {value}."))),
        },
    }
}

fn boolean(map: &Map<String, Value>, key: &str) -> Result<bool, Invalid> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(Invalid(format!("{key} must be true or false, not {}.", kind(other)))),
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn optional<'a>(map: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>, Invalid> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(_) => string(map, key).map(Some),
    }
}

fn count(map: &Map<String, Value>, key: &str) -> Result<u64, Invalid> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(0),
        Some(value) => value
            .as_u64()
            .ok_or_else(|| Invalid(format!("{key} must be an integer of at least 0, not {value}."))),
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

fn run(
    ctx: &FileContext<'_>,
    options: &SessionOptions,
    tool: ToolName,
    args: &Value,
    delivered: Option<&Delivered>,
    limits: &search::Limits<'_>,
    json: Option<&mut Vec<u8>>,
) -> Result<Outcome, Invalid> {
    let name = tool.as_str();
    let outcome = match tool {
        ToolName::Read => {
            let map = fields(tool, args, &["file_path", "offset", "limit"])?;
            let path = string(map, "file_path")?;
            let offset = positive(map, "offset")?.unwrap_or(1);
            let asked = positive(map, "limit")?;
            let most = u64::from(READ_LINE_LIMIT);
            let request =
                render::read_request(offset, asked.unwrap_or(most).min(most), options.read_max_bytes);
            let capped = asked.is_some_and(|n| n > most);
            ctx.read(path, &request).map_warm(|view| match json {
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
            })
        }
        ToolName::Write => {
            let map = fields(tool, args, &["file_path", "content"])?;
            let path = string(map, "file_path")?;
            let content = string(map, "content")?;
            ctx.write(path, content).map(|step| step.map(|view| Text::Plain(render::write(&view))))
        }
        ToolName::Edit => {
            let map = fields(tool, args, &["file_path", "old_string", "new_string", "replace_all"])?;
            let path = string(map, "file_path")?;
            let old = string(map, "old_string")?;
            let new = string(map, "new_string")?;
            let replace_all = boolean(map, "replace_all")?;
            let change = Replacement::new(old, new, replace_all).map_err(|why| match why {
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
            match options.stale_edits {
                StaleEdits::Refuse => {
                    ctx.edit(path, &change).map(|step| step.map(|view| Text::Plain(render::edit(&view))))
                }
                StaleEdits::Merge => ctx.edit_merging(path, &change).map(|step| {
                    step.map(|merged| {
                        Text::Plain(match &merged.outside {
                            Some(outside) => render::edit_over(&merged.edit, outside),
                            None => render::edit(&merged.edit),
                        })
                    })
                }),
            }
        }
        ToolName::Glob => {
            let map = fields(tool, args, &["pattern", "path"])?;
            let pattern = string(map, "pattern")?;
            let path = optional(map, "path")?;
            return searched(search::glob(ctx, pattern, path, options.read_max_bytes, limits), name);
        }
        ToolName::Grep => {
            let map = fields(
                tool,
                args,
                &[
                    "pattern",
                    "path",
                    "glob",
                    "type",
                    "output_mode",
                    "case_insensitive",
                    "context",
                    "multiline",
                    "head_limit",
                    "offset",
                ],
            )?;
            let mode = match optional(map, "output_mode")? {
                None => Mode::FilesWithMatches,
                Some(name) => Mode::from_name(name).ok_or_else(|| {
                    Invalid(format!(
                        "output_mode must be files_with_matches, content or count, not {name:?}."
                    ))
                })?,
            };
            let pattern = string(map, "pattern")?;
            if pattern.is_empty() {
                return Err(Invalid("pattern must not be empty.".into()));
            }
            let request = GrepRequest {
                pattern,
                path: optional(map, "path")?,
                glob: optional(map, "glob")?,
                file_type: optional(map, "type")?,
                mode,
                case_insensitive: boolean(map, "case_insensitive")?,
                context: usize::try_from(count(map, "context")?.min(100)).unwrap_or(100),
                multiline: boolean(map, "multiline")?,
                head_limit: positive(map, "head_limit")?,
                offset: count(map, "offset")?,
                budget: options.read_max_bytes,
            };
            return searched(search::grep(ctx, &request, limits), name);
        }
    };
    let budget = options.read_max_bytes;
    let file_path = || args.get("file_path").and_then(Value::as_str).unwrap_or_default();
    Ok(match outcome {
        Ok(Step::NeedsGate(pending)) => {
            Ok(Step::NeedsGate(later(pending, tool, file_path().to_owned(), budget)))
        }
        Ok(Step::Done(text)) => Ok(Step::Done(text)),
        Ok(Step::NeedsBlocking) => Ok(Step::NeedsBlocking),
        Err(err) => failed(ctx, tool, file_path(), budget, Err(err)).map(Step::Done),
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
    let name = tool.as_str();
    if let (Err(ContextError::NotObserved { .. }), ToolName::Write | ToolName::Edit) = (&outcome, tool)
        && let Some(shown) = unread_shown(ctx, file_path, budget)
    {
        let text = render::not_read_shown(name, &shown);
        return outcome.map_err(|err| Failure { text, cause: Cause::File(err) });
    }
    outcome.map_err(|err| Failure { text: render::error(&err, name), cause: Cause::File(err) })
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
fn unread_shown(ctx: &FileContext<'_>, path: &str, budget: u64) -> Option<ReadView> {
    let request = render::read_request(1, UNREAD_SHOWN_LINES, budget.min(UNREAD_SHOWN_BYTES));
    ctx.read_if_whole(path, &request).ok()?.done()?
}

/// Calls one of this session's tools. Blocking (it reads and writes files). With `delivered`
/// (the owner's dedup record, when the session asked for `dedupReads`), a read of lines this
/// owner already received unchanged answers one short line (see [`dedup`]). `limits` bound a
/// search (`glob`, `grep`) and say when its request was cancelled: it then fails as cancelled,
/// and at its time limit it answers what it found.
/// With `json` (a buffer holding the caller's response up to the opening quote of the text), a
/// successful read writes its text there JSON-escaped and answers [`Text::Written`]; every
/// other answer is [`Text::Plain`] and leaves the buffer as it was.
pub fn call(
    ctx: &FileContext<'_>,
    options: &SessionOptions,
    name: &str,
    args: &Value,
    delivered: Option<&Delivered>,
    limits: &search::Limits<'_>,
    json: Option<&mut Vec<u8>>,
) -> Result<Outcome, UnknownTool> {
    let tools = &options.tools;
    let Some(tool) = ToolName::from_name(name).filter(|t| tools.contains(t)) else {
        return Err(UnknownTool {
            name: name.to_owned(),
            available: tools.iter().map(|t| t.as_str()).collect::<Vec<_>>().join(", "),
        });
    };
    Ok(match run(ctx, options, tool, args, delivered, limits, json) {
        Ok(result) => result,
        Err(Invalid(text)) => Err(Failure { text, cause: Cause::InvalidArgument }),
    })
}
