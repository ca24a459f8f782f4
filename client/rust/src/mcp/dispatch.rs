//! Routing of each message from the client: parsing a line, refusing batches outside MCP
//! 2025-03-26, running `tools/*` requests as tasks (so `notifications/cancelled` can call them
//! off at the daemon and leave them unanswered),
//! and sending each request to its method.

use std::sync::Arc;

use filectx_protocol::error::{INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR};
use serde_json::{Value, json};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::jsonrpc::{Incoming, classify, error_response};
use super::methods;
use super::session::Shared;

/// The only version that allows JSON-RPC batches (added in 2025-03-26, removed in 2025-06-18).
const BATCH_VERSION: &str = "2025-03-26";

/// Parses and serves one input line. `tools/*` requests run as tasks in `tasks`; the rest is
/// answered before the next line is read, so `initialize` (which may open the daemon session)
/// takes effect in order.
pub(super) async fn handle_line(shared: &Arc<Shared>, line: &[u8], tasks: &mut JoinSet<()>) {
    if line.iter().all(u8::is_ascii_whitespace) {
        return;
    }
    let value: Value = match serde_json::from_slice(line) {
        Ok(value) => value,
        Err(error) => {
            let message = format!("Parse error: {error}");
            return shared.send(error_response(Value::Null, PARSE_ERROR, message)).await;
        }
    };
    let Value::Array(batch) = value else {
        match classify(value) {
            Incoming::Request { id, method, params } if is_tool_method(&method) => {
                let key = id.to_string();
                let cancel = CancellationToken::new();
                // Registered before the task runs, so its end always finds (or misses) it.
                shared.lock_running().insert(key.clone(), cancel.clone());
                let task_shared = Arc::clone(shared);
                tasks.spawn(async move {
                    let response = request(&task_shared, id, &method, params, false, &cancel).await;
                    // Whoever takes the entry first decides: a cancelled call is never answered.
                    let wanted = task_shared.lock_running().remove(&key).is_some();
                    if wanted && !cancel.is_cancelled() {
                        task_shared.send(response).await;
                    }
                });
            }
            incoming => {
                if let Some(response) = message(shared, incoming, false, &CancellationToken::new()).await {
                    shared.send(response).await;
                }
            }
        }
        return;
    };
    let version = shared.lock_state().version;
    if version != Some(BATCH_VERSION) {
        let message = match version {
            Some(version) => format!("Invalid Request: MCP {version} has no JSON-RPC batches"),
            None => "Invalid Request: a batch before initialize (initialize cannot be batched)".to_owned(),
        };
        return shared.send(error_response(Value::Null, INVALID_REQUEST, message)).await;
    }
    if batch.is_empty() {
        let message = "Invalid Request: an empty batch".to_owned();
        return shared.send(error_response(Value::Null, INVALID_REQUEST, message)).await;
    }
    let task_shared = Arc::clone(shared);
    tasks.spawn(async move {
        // Batch entries cannot be cancelled one by one: nothing ever fires this token.
        let never = CancellationToken::new();
        let answers = batch.into_iter().map(|entry| message(&task_shared, classify(entry), true, &never));
        let responses: Vec<Value> = futures::future::join_all(answers).await.into_iter().flatten().collect();
        if !responses.is_empty() {
            task_shared.send(Value::Array(responses)).await;
        }
    });
}

/// Whether `method` is forwarded to the daemon (and so may take a while).
fn is_tool_method(method: &str) -> bool {
    matches!(method, "tools/list" | "tools/call")
}

/// Serves one message; returns the response to send, if any.
async fn message(
    shared: &Shared,
    incoming: Incoming,
    in_batch: bool,
    cancel: &CancellationToken,
) -> Option<Value> {
    match incoming {
        Incoming::Request { id, method, params } => {
            Some(request(shared, id, &method, params, in_batch, cancel).await)
        }
        Incoming::Notification { method, params } => {
            notification(shared, &method, &params);
            None
        }
        Incoming::Response => None,
        Incoming::Invalid { id, message } => Some(error_response(id, INVALID_REQUEST, message)),
    }
}

/// Serves a notification from the client.
fn notification(shared: &Shared, method: &str, params: &Value) {
    match method {
        "notifications/initialized" => {
            let initialized = {
                let mut state = shared.lock_state();
                if state.version.is_some() {
                    state.initialized = true;
                }
                state.initialized
            };
            if !initialized {
                shared.diagnose("ignoring notifications/initialized before initialize");
            }
        }
        "notifications/cancelled" => {
            // The call's task forwards the cancellation to the daemon and answers nothing.
            let running =
                params.get("requestId").and_then(|id| shared.lock_running().remove(&id.to_string()));
            if let Some(cancel) = running {
                cancel.cancel();
            }
        }
        // Other notifications (roots/list_changed, progress, …) concern nothing this server does.
        _ => {}
    }
}

/// Serves a request and returns its response; `cancel` fires when the client cancelled it.
async fn request(
    shared: &Shared,
    id: Value,
    method: &str,
    params: Value,
    in_batch: bool,
    cancel: &CancellationToken,
) -> Value {
    let version = shared.lock_state().version;
    let outcome = match (method, version) {
        ("ping", _) => Ok(json!({})),
        ("initialize", _) if in_batch => {
            Err((INVALID_REQUEST, "Invalid Request: initialize cannot be part of a batch".to_owned()))
        }
        ("initialize", None) => methods::initialize(shared, &params).await,
        ("initialize", Some(_)) => Err((INVALID_REQUEST, "Invalid Request: already initialized".to_owned())),
        (_, None) => Err((
            INVALID_REQUEST,
            format!("Invalid Request: the server is not initialized; send initialize before {method}"),
        )),
        ("tools/list", Some(version)) => methods::tools_list(shared, version, cancel).await,
        ("tools/call", Some(version)) => methods::tools_call(shared, version, params, cancel).await,
        ("logging/setLevel", Some(_)) => methods::set_level(shared, &params),
        (_, Some(_)) => Err((METHOD_NOT_FOUND, format!("Method not found: {method}"))),
    };
    match outcome {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err((code, message)) => error_response(id, code, message),
    }
}
