//! The state the MCP server's handlers share: the daemon session, the outgoing queue, the
//! negotiated version and log level, the lost connection, and the running tool calls.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::Diagnostics;
use crate::Client;

/// What the request handlers share.
pub(super) struct Shared {
    pub(super) client: Client,
    /// The daemon session's `instructions`.
    pub(super) instructions: String,
    /// Serialized messages for the output.
    pub(super) out: mpsc::Sender<String>,
    state: Mutex<State>,
    /// Running `tools/*` requests by their request id (as JSON text): `notifications/cancelled`
    /// takes one out and fires its token; a request still found here when done is answered.
    running: Mutex<HashMap<String, CancellationToken>>,
    diagnostics: Diagnostics,
}

/// The MCP session's state.
#[derive(Debug, Default)]
pub(super) struct State {
    /// The negotiated protocol version, once `initialize` was answered.
    pub(super) version: Option<&'static str>,
    /// Whether `notifications/initialized` arrived: notifications may be sent.
    pub(super) initialized: bool,
    /// Index into [`super::notices::LEVELS`] of the least severe level the client wants
    /// (`logging/setLevel`).
    pub(super) min_level: usize,
    /// Why the daemon connection was lost, once it was.
    pub(super) lost: Option<String>,
    /// Set while closing the session at the end: the hang-up that follows is no loss.
    pub(super) closing: bool,
    /// Change notices dropped because the output was not read fast enough.
    pub(super) dropped: u64,
}

impl Shared {
    /// The state of a server that has read nothing yet.
    pub(super) fn new(
        client: Client,
        instructions: String,
        out: mpsc::Sender<String>,
        diagnostics: Diagnostics,
    ) -> Self {
        Self {
            client,
            instructions,
            out,
            state: Mutex::new(State::default()),
            running: Mutex::new(HashMap::new()),
            diagnostics,
        }
    }

    pub(super) fn lock_state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn lock_running(&self) -> MutexGuard<'_, HashMap<String, CancellationToken>> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues a message for the output (waiting while the queue is full). A closed output drops
    /// it.
    pub(super) async fn send(&self, message: Value) {
        let _ = self.out.send(message.to_string()).await;
    }

    /// Says something to the operator (never to the MCP client).
    pub(super) fn diagnose(&self, message: &str) {
        (self.diagnostics)(message);
    }
}
