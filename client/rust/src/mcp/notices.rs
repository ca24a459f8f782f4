//! What the server tells the client unasked, as `notifications/message`: each change of a file
//! the daemon session read (relayed from `file/didChange`), and the loss of the daemon
//! connection (with the text every later tool call answers).

use std::sync::Arc;

use filectx_protocol::FileDidChange;
use futures::StreamExt as _;
use serde_json::{Value, json};

use super::session::Shared;
use crate::{ClientError, Notifications};

/// The `logger` of every `notifications/message`.
const LOGGER: &str = "filectx";
/// MCP (syslog) log levels, least severe first.
pub(super) const LEVELS: [&str; 8] =
    ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"];
/// Level of a change notice.
const CHANGE_LEVEL: &str = "warning";
/// Level of the notice that the daemon connection was lost.
const LOST_LEVEL: &str = "error";

impl Shared {
    /// Queues a `notifications/message` of `level` when the client is initialized and wants that
    /// level; drops it (counting) when the queue is full.
    pub(super) fn log(&self, level: &str, data: Value) {
        let severity = LEVELS.iter().position(|l| *l == level).unwrap_or(0);
        let mut state = self.lock_state();
        if !state.initialized || severity < state.min_level {
            return;
        }
        let message = json!({
            "jsonrpc": "2.0",
            "method": "notifications/message",
            "params": {"level": level, "logger": LOGGER, "data": data},
        });
        if self.out.try_send(message.to_string()).is_err() {
            state.dropped += 1;
            let dropped = state.dropped;
            drop(state);
            if dropped.is_power_of_two() {
                self.diagnose(&format!(
                    "{dropped} change notices dropped: the MCP client does not read stdout fast enough"
                ));
            }
        }
    }

    /// Records that the daemon connection is gone (once), and says so in the diagnostics and to
    /// the client.
    pub(super) fn connection_lost(&self, reason: String) {
        {
            let mut state = self.lock_state();
            if state.closing || state.lost.is_some() {
                return;
            }
            state.lost = Some(reason.clone());
        }
        self.diagnose(&format!(
            "the connection to the daemon at {} was lost: {reason}; tool calls now fail until this \
             MCP server is restarted",
            self.socket.display()
        ));
        self.log(LOST_LEVEL, json!({"message": lost_text(&reason)}));
    }
}

/// The sentence a model reads when the daemon connection is gone.
pub(super) fn lost_text(reason: &str) -> String {
    format!(
        "The filectx daemon connection was lost ({reason}), so the file tools are unavailable until \
         the filectx MCP server is restarted. If a write or edit was under way, its outcome is \
         unknown: read the file again once the tools are back."
    )
}

/// Forwards the daemon's `file/didChange` notifications as `notifications/message`; when the
/// stream ends because the connection broke, records the loss.
pub(super) async fn relay_changes(shared: Arc<Shared>, mut changes: Notifications) {
    while let Some(params) = changes.next().await {
        match serde_json::from_value::<FileDidChange>(params) {
            Ok(change) => shared.log(CHANGE_LEVEL, change_data(&change)),
            Err(error) => shared.diagnose(&format!("ignoring a malformed file/didChange: {error}")),
        }
    }
    if changes.lagged() {
        shared.diagnose("change notices arrived faster than they could be relayed; later ones are lost");
        return;
    }
    let Some(client) = shared.client() else { return };
    let reason = match client.disconnected().await {
        ClientError::Transport(reason) => reason,
        other => other.to_string(),
    };
    shared.connection_lost(reason);
}

/// The `data` of a change notice: the paths, the new version, and what the model should do.
fn change_data(change: &FileDidChange) -> Value {
    let shown = &change.display_path;
    let message = match &change.version {
        Some(_) => format!(
            "{shown} changed on disk since you read it (another program or agent wrote it). Read it \
             again before editing or overwriting it: a change based on what you read before will be \
             refused."
        ),
        None => format!(
            "{shown} was deleted (or is no longer a regular file) since you read it. Read it again \
             before relying on its content; writing it creates it anew."
        ),
    };
    json!({
        "path": change.path,
        "displayPath": change.display_path,
        "version": change.version,
        "message": message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn change_notices_name_the_file_and_ask_for_a_new_read() {
        let change = FileDidChange {
            path: "/srv/app/src/lib.rs".to_owned(),
            display_path: "src/lib.rs".to_owned(),
            version: Some("abc".to_owned()),
            owner: None,
        };
        let data = change_data(&change);
        assert_eq!(data["path"], "/srv/app/src/lib.rs");
        let message = data["message"].as_str().unwrap_or_default();
        assert!(message.starts_with("src/lib.rs changed") && message.contains("Read it again"), "{message}");
        let deleted = change_data(&FileDidChange { version: None, ..change });
        assert!(deleted["message"].as_str().unwrap_or_default().contains("was deleted"));
    }
}
