//! The MCP methods the server answers itself or forwards to the daemon session: `initialize`
//! (version negotiation, and opening the session when the server does), `logging/setLevel`,
//! `tools/list` (daemon tools as MCP tools) and `tools/call` (daemon results as MCP
//! `CallToolResult`s: text for the model, errors saying so in their first words, arguments no
//! schema names dropped).

use std::future::Future;
use std::time::Duration;

use filectx_protocol::error::{INTERNAL_ERROR, INVALID_PARAMS, REQUEST_CANCELLED};
use filectx_protocol::methods;
use serde_json::{Map, Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::jsonrpc::Outcome;
use super::notices::{LEVELS, lost_text};
use super::open::{self, Plan};
use super::session::{ArgumentNames, Shared};
use super::{PROTOCOL_VERSIONS, Setup};
use crate::{Client, ClientError};

/// First version with tool `annotations`.
const ANNOTATIONS_SINCE: &str = "2025-03-26";
/// First version with `structuredContent`, `outputSchema` and `title`.
const STRUCTURED_SINCE: &str = "2025-06-18";

/// How long a `tools/call` with a progress token waits for the daemon before the first
/// `notifications/progress`.
const PROGRESS_AFTER: Duration = Duration::from_secs(1);
/// How often `notifications/progress` follow while the daemon still has not answered.
const PROGRESS_EVERY: Duration = Duration::from_secs(3);
/// The `message` of those notifications.
const PROGRESS_MESSAGE: &str = "waiting for the daemon (a write gate may be reviewing this change)";

/// The version to answer with: the client's when supported, else the newest supported.
fn negotiate(requested: &str) -> &'static str {
    PROTOCOL_VERSIONS.into_iter().find(|v| *v == requested).unwrap_or(PROTOCOL_VERSIONS[0])
}

/// Whether the negotiated `version` is `since` or later (versions are dates: they sort as text).
fn at_least(version: &str, since: &str) -> bool {
    version >= since
}

/// `initialize`: negotiates the version, opens the daemon session when the server does (shaped
/// by the client's `clientInfo`), and describes the server (its instructions are the daemon
/// session's). A session the daemon refuses is answered with its error, and stops the server.
pub(super) async fn initialize(shared: &Shared, params: &Value) -> Outcome {
    let Some(requested) = params.get("protocolVersion").and_then(Value::as_str) else {
        return Err((INVALID_PARAMS, "Invalid params: initialize needs a string protocolVersion".to_owned()));
    };
    let version = negotiate(requested);
    let instructions = match shared.take_setup() {
        Some(Setup::Opened(instructions)) => instructions,
        Some(Setup::Deferred(plan)) => match open_session(shared, &plan, params.get("clientInfo")).await {
            Ok(instructions) => instructions,
            Err(error) => {
                let answer = refusal(&error);
                shared.refused(error);
                return Err(answer);
            }
        },
        None => return Err((INTERNAL_ERROR, "Internal error: the session was already set up".to_owned())),
    };
    shared.lock_state().version = Some(version);
    let mut server_info = json!({"name": "filectx", "version": env!("CARGO_PKG_VERSION")});
    if at_least(version, STRUCTURED_SINCE) {
        server_info["title"] = json!("filectx file tools");
    }
    Ok(json!({
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": false}, "logging": {}},
        "serverInfo": server_info,
        "instructions": instructions,
    }))
}

/// Opens the daemon session for the MCP client of `client_info` and returns its instructions:
/// on the connection made at the start while it is up, else (the daemon closes a connection
/// that opens no session within its `--initialize-timeout`, and the MCP client may take its
/// time) on a new one, as also when the first connection breaks during the opening.
async fn open_session(
    shared: &Shared,
    plan: &Plan,
    client_info: Option<&Value>,
) -> Result<String, ClientError> {
    let diagnose = |message: &str| shared.diagnose(message);
    let probe = shared.take_probe().filter(Client::is_connected);
    let reused = probe.is_some();
    let mut client = match probe {
        Some(client) => client,
        None => Client::connect(&shared.socket).await?,
    };
    let session = match open::open(&client, plan, client_info, &diagnose).await {
        Err(ClientError::Transport(_)) if reused => {
            client = Client::connect(&shared.socket).await?;
            open::open(&client, plan, client_info, &diagnose).await?
        }
        other => other?,
    };
    // Nothing is observed before the first tool call, so no change notice can be missed.
    let changes = client.notifications(methods::FILE_DID_CHANGE).await?;
    shared.opened(client, changes);
    Ok(session.instructions)
}

/// The `initialize` error for a session the daemon would not open: its own code and words.
fn refusal(error: &ClientError) -> (i32, String) {
    let reason = match error {
        ClientError::Rpc { message, .. } => match error.fs_code() {
            Some(code) => format!("{code}: {message}"),
            None => message.clone(),
        },
        other => other.to_string(),
    };
    let code = match error {
        ClientError::Rpc { code, .. } => *code,
        _ => INTERNAL_ERROR,
    };
    (code, format!("filectx could not open its daemon session: {reason}"))
}

/// `logging/setLevel`: the least severe level of `notifications/message` the client wants.
pub(super) fn set_level(shared: &Shared, params: &Value) -> Outcome {
    let level = params.get("level").and_then(Value::as_str);
    let Some(index) = level.and_then(|level| LEVELS.iter().position(|l| *l == level)) else {
        let message = format!("Invalid params: level must be one of {}", LEVELS.join(", "));
        return Err((INVALID_PARAMS, message));
    };
    shared.lock_state().min_level = index;
    Ok(json!({}))
}

/// `tools/list`: the daemon session's tools, with what the negotiated version (and
/// [`Shared::structured`]) adds.
pub(super) async fn tools_list(shared: &Shared, version: &str, cancel: &CancellationToken) -> Outcome {
    if let Some(reason) = shared.lock_state().lost.clone() {
        return Err((INTERNAL_ERROR, lost_text(&reason)));
    }
    let tools = daemon_tools(shared, cancel).await?;
    shared.learn_arguments(&tools);
    let tools: Vec<Value> =
        tools.into_iter().map(|tool| mcp_tool(tool, version, shared.structured)).collect();
    Ok(json!({"tools": tools}))
}

/// The daemon session's tool descriptors.
async fn daemon_tools(shared: &Shared, cancel: &CancellationToken) -> Result<Vec<Value>, (i32, String)> {
    let Some(client) = shared.client() else { return Err(no_session()) };
    let result: Value = client
        .request_cancellable(methods::TOOLS_LIST, (), cancel.cancelled())
        .await
        .map_err(|error| rpc_error(shared, error))?;
    Ok(result.get("tools").and_then(Value::as_array).cloned().unwrap_or_default())
}

/// A daemon tool descriptor as an MCP `Tool`: its input schema no longer forbids other
/// arguments (harnesses add their own, and the server drops them); annotations from 2025-03-26;
/// a title from 2025-06-18, and then, when `structured`, the output schema of the
/// `structuredContent` this server adds. From 2025-06-18 (which defines a tool's `_meta`) each
/// tool also asks Claude Code to load it up front (`anthropic/alwaysLoad`): otherwise it defers
/// MCP tools behind its ToolSearch, and the model spends a turn finding its file tools.
fn mcp_tool(mut tool: Value, version: &str, structured: bool) -> Value {
    if let Some(schema) = tool.get_mut("inputSchema").and_then(Value::as_object_mut) {
        schema.remove("additionalProperties");
    }
    let name = tool.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
    let Some(object) = tool.as_object_mut() else { return tool };
    let (title, read_only, destructive, idempotent) = match name.as_str() {
        "read" => ("Read file", true, false, true),
        "write" => ("Write file", false, true, true),
        "edit" => ("Edit file", false, true, false),
        "glob" => ("Find files", true, false, true),
        "grep" => ("Search file contents", true, false, true),
        "undo" => ("Undo last change", false, true, false),
        "diagnostics" => ("File diagnostics", true, false, true),
        _ => return tool,
    };
    if at_least(version, ANNOTATIONS_SINCE) {
        let mut annotations = json!({"readOnlyHint": read_only, "openWorldHint": false});
        if !read_only {
            annotations["destructiveHint"] = json!(destructive);
            annotations["idempotentHint"] = json!(idempotent);
        }
        if at_least(version, STRUCTURED_SINCE) {
            annotations["title"] = json!(title);
        }
        object.insert("annotations".to_owned(), annotations);
    }
    if at_least(version, STRUCTURED_SINCE) {
        object.insert("title".to_owned(), json!(title));
        object.insert("_meta".to_owned(), json!({ALWAYS_LOAD: true}));
        if structured {
            object.insert("outputSchema".to_owned(), output_schema());
        }
    }
    tool
}

/// The tool `_meta` key by which Claude Code loads an MCP tool with its own instead of deferring
/// it behind ToolSearch.
const ALWAYS_LOAD: &str = "anthropic/alwaysLoad";

/// The schema of the `structuredContent` of every tool result (2025-06-18 and later, with
/// `--structured`).
fn output_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "text": {
                "type": "string",
                "description": "The tool's text, as in the text content: for read, the numbered lines and footer; \
                                for glob and grep, the paths or lines found and footer; for a failure, what went wrong and what to do."
            },
            "error": {
                "type": "object",
                "description": "Present when the call failed (isError).",
                "properties": {
                    "name": {"type": "string", "const": "FsError"},
                    "code": {"type": "string", "description": "The stable FS_* identifier, e.g. FS_STALE_VERSION."}
                },
                "required": ["name", "code"]
            }
        },
        "required": ["text"]
    })
}

/// `tools/call`, forwarded without the arguments the tool's schema does not name; the daemon's
/// result made an MCP `CallToolResult`. When `cancel` fires, the daemon is asked to cancel it
/// too. With a `_meta.progressToken`, progress notifications say the call is still waiting for
/// the daemon.
pub(super) async fn tools_call(
    shared: &Shared,
    version: &str,
    mut params: Value,
    cancel: &CancellationToken,
) -> Outcome {
    // Taken, not copied: arguments may be megabytes.
    let arguments = params.get_mut("arguments").map_or_else(|| Value::Object(Map::new()), Value::take);
    let Some(name) = params.get("name").and_then(Value::as_str) else {
        return Err((INVALID_PARAMS, "Invalid params: tools/call needs a string name".to_owned()));
    };
    let structured = shared.structured;
    if let Some(reason) = shared.lock_state().lost.clone() {
        return Ok(failure_result(&lost_text(&reason), version, structured));
    }
    let arguments = match argument_names(shared, cancel).await {
        Some(names) => drop_unknown(shared, name, arguments, &names),
        None => arguments,
    };
    let call = json!({"name": name, "arguments": arguments});
    let progress_token = params.get("_meta").and_then(|meta| meta.get("progressToken")).cloned();
    let Some(client) = shared.client() else { return Err(no_session()) };
    let answer = client.request_cancellable::<Value>(methods::TOOLS_CALL, call, cancel.cancelled());
    let answer = match progress_token {
        Some(token) => with_progress(shared, version, token, cancel, answer).await,
        None => answer.await,
    };
    match answer {
        Ok(result) => Ok(call_result(&result, version, structured)),
        Err(ClientError::Cancelled) => Err((REQUEST_CANCELLED, "Request cancelled".to_owned())),
        Err(ClientError::Rpc { code, message, .. }) => Err((code, message)),
        Err(ClientError::Timeout(waited)) => {
            let text = format!(
                "The filectx daemon did not answer within {} s. The outcome of this call is unknown: \
                 read the file again before changing it.",
                waited.as_secs()
            );
            Ok(failure_result(&text, version, structured))
        }
        Err(error) => {
            let (_, text) = rpc_error(shared, error);
            Ok(failure_result(&text, version, structured))
        }
    }
}

/// The error of a tool request without a daemon session (never once `initialize` succeeded).
fn no_session() -> (i32, String) {
    (INTERNAL_ERROR, "Internal error: no daemon session is open".to_owned())
}

/// The tools' argument names: known from an earlier `tools/list`, else asked of the daemon now.
/// `None` when the daemon cannot say (the arguments are then forwarded as they came).
async fn argument_names(shared: &Shared, cancel: &CancellationToken) -> Option<ArgumentNames> {
    if let Some(names) = shared.argument_names() {
        return Some(names);
    }
    let tools = daemon_tools(shared, cancel).await.ok()?;
    Some(shared.learn_arguments(&tools))
}

/// `arguments` without the fields the schema of `tool` does not name (a harness's own, such as
/// Gemini CLI's `wait_for_previous`); each dropped name is said once in the diagnostics, within
/// the bounds of [`super::session::DroppedArguments`]. An unknown tool, or arguments that are not
/// an object, are left for the daemon to refuse.
fn drop_unknown(shared: &Shared, tool: &str, arguments: Value, names: &ArgumentNames) -> Value {
    let Some(known) = names.get(tool) else { return arguments };
    let mut fields = match arguments {
        Value::Object(fields) => fields,
        other => return other,
    };
    fields.retain(|field, _| {
        let keep = known.contains(field);
        if !keep {
            shared.report_drop(tool, field);
        }
        keep
    });
    Value::Object(fields)
}

/// Awaits `answer`; while it is not there, sends `notifications/progress` for `token`: first
/// after [`PROGRESS_AFTER`], then every [`PROGRESS_EVERY`], never once `cancel` fired.
async fn with_progress<T>(
    shared: &Shared,
    version: &str,
    token: Value,
    cancel: &CancellationToken,
    answer: impl Future<Output = T>,
) -> T {
    let mut answer = std::pin::pin!(answer);
    let mut next = Instant::now() + PROGRESS_AFTER;
    let mut progress = 0_u64;
    loop {
        tokio::select! {
            biased;
            done = &mut answer => return done,
            () = tokio::time::sleep_until(next) => {}
        }
        next += PROGRESS_EVERY;
        if cancel.is_cancelled() {
            continue;
        }
        progress += 1;
        let mut params = json!({"progressToken": token, "progress": progress});
        // `message` came with 2025-03-26.
        if at_least(version, ANNOTATIONS_SINCE) {
            params["message"] = json!(PROGRESS_MESSAGE);
        }
        shared.send(json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})).await;
    }
}

/// A daemon failure as an error code and a message; a broken connection is recorded as lost.
fn rpc_error(shared: &Shared, error: ClientError) -> (i32, String) {
    match error {
        ClientError::Rpc { code, message, .. } => (code, message),
        ClientError::Transport(reason) => {
            shared.connection_lost(reason.clone());
            (INTERNAL_ERROR, lost_text(&reason))
        }
        other => (INTERNAL_ERROR, format!("the filectx daemon's answer could not be used: {other}")),
    }
}

/// The daemon's `tools/call` result as an MCP `CallToolResult`: its text and `isError`. A
/// failure's text starts by saying it is one, with its code (`Error (FS_STALE_VERSION): …`: some
/// clients never tell their model a result is an error), and the code is in `_meta` too, which
/// clients keep from the model. With `structured`, from 2025-06-18 also `structuredContent`
/// `{text, error?}`.
fn call_result(daemon: &Value, version: &str, structured: bool) -> Value {
    let content = daemon.get("content").cloned().unwrap_or_else(|| json!([]));
    let is_error = daemon.get("isError").and_then(Value::as_bool).unwrap_or(false);
    let text: String = content
        .as_array()
        .into_iter()
        .flatten()
        .filter(|block| block.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|block| block.get("text").and_then(Value::as_str))
        .collect();
    if !is_error {
        let mut result = json!({"content": content, "isError": false});
        if structured && at_least(version, STRUCTURED_SINCE) {
            result["structuredContent"] = json!({"text": text});
        }
        return result;
    }
    let error = daemon.get("error");
    let code = error.and_then(|error| error.get("code")).and_then(Value::as_str);
    let mut result = failure_result_with(&marked(code, &text), version, structured);
    if let Some(code) = code {
        result["_meta"] = json!({"filectx": {"code": code}});
    }
    if let (Some(error), Some(shown)) = (error, result.get_mut("structuredContent")) {
        shown["error"] = error.clone();
    }
    result
}

/// A failed call's result made by this server (no daemon answer to relay): `text`, said to be
/// an error in its first word.
fn failure_result(text: &str, version: &str, structured: bool) -> Value {
    failure_result_with(&marked(None, text), version, structured)
}

/// A failed call's result of the (already marked) `text`.
fn failure_result_with(text: &str, version: &str, structured: bool) -> Value {
    let mut result = json!({"content": [{"type": "text", "text": text}], "isError": true});
    if structured && at_least(version, STRUCTURED_SINCE) {
        result["structuredContent"] = json!({"text": text});
    }
    result
}

/// A failure's text, starting by saying it is one: `Error (FS_CODE): ` when the daemon gave its
/// code, else `Error: ` (a text already starting so is left as it is).
fn marked(code: Option<&str>, text: &str) -> String {
    if text.starts_with("Error (") || text.starts_with("Error:") {
        return text.to_owned();
    }
    match code {
        Some(code) => format!("Error ({code}): {text}"),
        None => format!("Error: {text}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_negotiate_to_the_clients_or_the_newest() {
        assert_eq!(negotiate("2024-11-05"), "2024-11-05");
        assert_eq!(negotiate("2025-03-26"), "2025-03-26");
        assert_eq!(negotiate("2025-06-18"), "2025-06-18");
        assert_eq!(negotiate("2099-01-01"), "2025-06-18");
        assert_eq!(negotiate("1.0"), "2025-06-18");
        assert!(at_least("2025-06-18", STRUCTURED_SINCE));
        assert!(!at_least("2025-03-26", STRUCTURED_SINCE));
        assert!(at_least("2025-03-26", ANNOTATIONS_SINCE));
        assert!(!at_least("2024-11-05", ANNOTATIONS_SINCE));
    }

    #[test]
    fn results_are_text_and_errors_say_so_first() {
        let daemon = json!({
            "content": [{"type": "text", "text": "File changed since you read it."}],
            "isError": true,
            "error": {"name": "FsError", "code": "FS_STALE_VERSION"},
        });
        let marked_text = "Error (FS_STALE_VERSION): File changed since you read it.";
        for version in PROTOCOL_VERSIONS {
            let result = call_result(&daemon, version, false);
            assert_eq!(
                result,
                json!({
                    "content": [{"type": "text", "text": marked_text}],
                    "isError": true,
                    "_meta": {"filectx": {"code": "FS_STALE_VERSION"}},
                })
            );
        }
        let ok = json!({"content": [{"type": "text", "text": "1\tok\n"}], "isError": false});
        assert_eq!(call_result(&ok, "2025-06-18", false), ok);
        // An error without a code, and one the daemon already marked.
        let bare = json!({"content": [{"type": "text", "text": "Gone."}], "isError": true});
        assert_eq!(call_result(&bare, "2025-06-18", false)["content"][0]["text"], "Error: Gone.");
        assert!(call_result(&bare, "2025-06-18", false).get("_meta").is_none());
        assert_eq!(marked(Some("FS_IO"), "Error (FS_IO): disk"), "Error (FS_IO): disk");
        assert_eq!(failure_result("Lost.", "2025-06-18", false)["content"][0]["text"], "Error: Lost.");
    }

    #[test]
    fn structured_results_gain_structured_content_from_2025_06_18() {
        let daemon = json!({
            "content": [{"type": "text", "text": "File changed since you read it."}],
            "isError": true,
            "error": {"name": "FsError", "code": "FS_STALE_VERSION"},
        });
        let old = call_result(&daemon, "2025-03-26", true);
        assert!(old.get("structuredContent").is_none(), "{old}");
        let new = call_result(&daemon, "2025-06-18", true);
        assert_eq!(
            new["structuredContent"]["text"],
            "Error (FS_STALE_VERSION): File changed since you read it."
        );
        assert_eq!(new["structuredContent"]["error"]["code"], "FS_STALE_VERSION");
        assert_eq!(new["_meta"]["filectx"]["code"], "FS_STALE_VERSION");
        let ok = call_result(
            &json!({"content": [{"type": "text", "text": "ok"}], "isError": false}),
            "2025-06-18",
            true,
        );
        assert_eq!(ok["structuredContent"], json!({"text": "ok"}));
        assert_eq!(
            failure_result("Lost.", "2025-06-18", true)["structuredContent"],
            json!({"text": "Error: Lost."})
        );
    }

    #[test]
    fn tools_gain_annotations_then_titles_and_output_schemas_only_when_structured() {
        let read = json!({
            "name": "read",
            "description": "Read.",
            "inputSchema": {"type": "object", "properties": {}, "additionalProperties": false},
        });
        let open_schema = json!({"type": "object", "properties": {}});
        let old = mcp_tool(read.clone(), "2024-11-05", true);
        assert_eq!(old, json!({"name": "read", "description": "Read.", "inputSchema": open_schema}));
        let mid = mcp_tool(read.clone(), "2025-03-26", true);
        assert_eq!(mid["annotations"]["readOnlyHint"], true);
        assert!(mid.get("outputSchema").is_none() && mid.get("title").is_none());
        assert!(mid.get("_meta").is_none(), "{mid}");
        let edit = json!({"name": "edit", "description": "Edit.", "inputSchema": {"type": "object"}});
        let text = mcp_tool(edit.clone(), "2025-06-18", false);
        assert_eq!(text["annotations"]["destructiveHint"], true);
        assert_eq!(text["title"], "Edit file");
        assert_eq!(text["_meta"], json!({"anthropic/alwaysLoad": true}));
        assert!(text.get("outputSchema").is_none(), "{text}");
        let new = mcp_tool(edit, "2025-06-18", true);
        assert_eq!(new["outputSchema"]["required"], json!(["text"]));
    }
}
