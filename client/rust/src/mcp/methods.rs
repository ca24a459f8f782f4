//! The MCP methods the server answers itself or forwards to the daemon session: `initialize`
//! (version negotiation), `logging/setLevel`, `tools/list` (daemon tools as MCP tools) and
//! `tools/call` (daemon results as MCP `CallToolResult`s, failures the model can act on).

use std::future::Future;
use std::time::Duration;

use filectx_protocol::error::{INTERNAL_ERROR, INVALID_PARAMS, REQUEST_CANCELLED};
use filectx_protocol::methods;
use serde_json::{Map, Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::PROTOCOL_VERSIONS;
use super::jsonrpc::Outcome;
use super::notices::{LEVELS, lost_text};
use super::session::Shared;
use crate::ClientError;

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

/// `initialize`: negotiates the version and describes the server (its instructions are the
/// daemon session's).
pub(super) fn initialize(shared: &Shared, params: &Value) -> Outcome {
    let Some(requested) = params.get("protocolVersion").and_then(Value::as_str) else {
        return Err((INVALID_PARAMS, "Invalid params: initialize needs a string protocolVersion".to_owned()));
    };
    let version = negotiate(requested);
    shared.lock_state().version = Some(version);
    let mut server_info = json!({"name": "filectx", "version": env!("CARGO_PKG_VERSION")});
    if at_least(version, STRUCTURED_SINCE) {
        server_info["title"] = json!("filectx file tools");
    }
    Ok(json!({
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": false}, "logging": {}},
        "serverInfo": server_info,
        "instructions": shared.instructions,
    }))
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

/// `tools/list`: the daemon session's tools, with what the negotiated version adds.
pub(super) async fn tools_list(shared: &Shared, version: &str, cancel: &CancellationToken) -> Outcome {
    if let Some(reason) = shared.lock_state().lost.clone() {
        return Err((INTERNAL_ERROR, lost_text(&reason)));
    }
    let result: Value = shared
        .client
        .request_cancellable(methods::TOOLS_LIST, (), cancel.cancelled())
        .await
        .map_err(|error| rpc_error(shared, error))?;
    let tools = result.get("tools").and_then(Value::as_array).cloned().unwrap_or_default();
    let tools: Vec<Value> = tools.into_iter().map(|tool| mcp_tool(tool, version)).collect();
    Ok(json!({"tools": tools}))
}

/// A daemon tool descriptor as an MCP `Tool`: annotations from 2025-03-26; a title and the output
/// schema of the `structuredContent` this server adds from 2025-06-18.
fn mcp_tool(mut tool: Value, version: &str) -> Value {
    let name = tool.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
    let Some(object) = tool.as_object_mut() else { return tool };
    let (title, read_only, destructive, idempotent) = match name.as_str() {
        "read" => ("Read file", true, false, true),
        "write" => ("Write file", false, true, true),
        "edit" => ("Edit file", false, true, false),
        "glob" => ("Find files", true, false, true),
        "grep" => ("Search file contents", true, false, true),
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
        object.insert("outputSchema".to_owned(), output_schema());
    }
    tool
}

/// The schema of the `structuredContent` of every tool result (2025-06-18 and later).
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

/// `tools/call`, forwarded; the daemon's result made an MCP `CallToolResult`. When `cancel`
/// fires, the daemon is asked to cancel it too. With a `_meta.progressToken`, progress
/// notifications say the call is still waiting for the daemon.
pub(super) async fn tools_call(
    shared: &Shared,
    version: &str,
    params: Value,
    cancel: &CancellationToken,
) -> Outcome {
    let Some(name) = params.get("name").and_then(Value::as_str) else {
        return Err((INVALID_PARAMS, "Invalid params: tools/call needs a string name".to_owned()));
    };
    if let Some(reason) = shared.lock_state().lost.clone() {
        return Ok(failure_result(&lost_text(&reason), version));
    }
    let arguments = params.get("arguments").cloned().unwrap_or_else(|| Value::Object(Map::new()));
    let call = json!({"name": name, "arguments": arguments});
    let progress_token = params.get("_meta").and_then(|meta| meta.get("progressToken")).cloned();
    let answer = shared.client.request_cancellable::<Value>(methods::TOOLS_CALL, call, cancel.cancelled());
    let answer = match progress_token {
        Some(token) => with_progress(shared, version, token, cancel, answer).await,
        None => answer.await,
    };
    match answer {
        Ok(result) => Ok(call_result(&result, version)),
        Err(ClientError::Cancelled) => Err((REQUEST_CANCELLED, "Request cancelled".to_owned())),
        Err(ClientError::Rpc { code, message, .. }) => Err((code, message)),
        Err(ClientError::Timeout(waited)) => {
            let text = format!(
                "The filectx daemon did not answer within {} s. The outcome of this call is unknown: \
                 read the file again before changing it.",
                waited.as_secs()
            );
            Ok(failure_result(&text, version))
        }
        Err(error) => {
            let (_, text) = rpc_error(shared, error);
            Ok(failure_result(&text, version))
        }
    }
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

/// The daemon's `tools/call` result as an MCP `CallToolResult`: its content blocks and
/// `isError`; from 2025-06-18 also `structuredContent` `{text, error?}`.
fn call_result(daemon: &Value, version: &str) -> Value {
    let content = daemon.get("content").cloned().unwrap_or_else(|| json!([]));
    let is_error = daemon.get("isError").and_then(Value::as_bool).unwrap_or(false);
    let mut result = json!({"content": content, "isError": is_error});
    if at_least(version, STRUCTURED_SINCE) {
        let text: String = content
            .as_array()
            .into_iter()
            .flatten()
            .filter(|block| block.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|block| block.get("text").and_then(Value::as_str))
            .collect();
        let mut structured = json!({"text": text});
        if let Some(error) = daemon.get("error").filter(|_| is_error) {
            structured["error"] = error.clone();
        }
        result["structuredContent"] = structured;
    }
    result
}

/// A failed call's result made by this server (no daemon answer to relay).
fn failure_result(text: &str, version: &str) -> Value {
    let mut result = json!({"content": [{"type": "text", "text": text}], "isError": true});
    if at_least(version, STRUCTURED_SINCE) {
        result["structuredContent"] = json!({"text": text});
    }
    result
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
    fn tool_results_gain_structured_content_from_2025_06_18() {
        let daemon = json!({
            "content": [{"type": "text", "text": "File changed since you read it."}],
            "isError": true,
            "error": {"name": "FsError", "code": "FS_STALE_VERSION"},
        });
        let old = call_result(&daemon, "2025-03-26");
        assert_eq!(old, json!({"content": daemon["content"], "isError": true}));
        let new = call_result(&daemon, "2025-06-18");
        assert_eq!(new["structuredContent"]["text"], "File changed since you read it.");
        assert_eq!(new["structuredContent"]["error"]["code"], "FS_STALE_VERSION");
        let ok = call_result(
            &json!({"content": [{"type": "text", "text": "ok"}], "isError": false}),
            "2025-06-18",
        );
        assert_eq!(ok["structuredContent"], json!({"text": "ok"}));
    }

    #[test]
    fn tools_gain_annotations_then_titles_and_output_schemas() {
        let read = json!({"name": "read", "description": "Read.", "inputSchema": {"type": "object"}});
        let old = mcp_tool(read.clone(), "2024-11-05");
        assert_eq!(old, read);
        let mid = mcp_tool(read.clone(), "2025-03-26");
        assert_eq!(mid["annotations"]["readOnlyHint"], true);
        assert!(mid.get("outputSchema").is_none() && mid.get("title").is_none());
        let edit = json!({"name": "edit", "description": "Edit.", "inputSchema": {"type": "object"}});
        let new = mcp_tool(edit, "2025-06-18");
        assert_eq!(new["annotations"]["destructiveHint"], true);
        assert_eq!(new["title"], "Edit file");
        assert_eq!(new["outputSchema"]["required"], json!(["text"]));
    }
}
