//! The state the MCP server's handlers share: the daemon session (or how to open it, and the
//! connection made at the start), the outgoing queue, the negotiated version and log level, the
//! lost connection, the tools' argument names (and the unknown ones dropped, bounded), and the
//! running tool calls.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{Diagnostics, Setup};
use crate::terminal::escape_field;
use crate::{Client, ClientError, Notifications};

/// Most dropped argument names remembered (and so reported), so a client sending ever new
/// names cannot grow the set without bound.
pub(super) const MAX_REPORTED_DROPS: usize = 64;

/// Most bytes of a dropped argument's name remembered and reported (cut on a character
/// boundary): a client may name an argument with megabytes.
pub(super) const MAX_DROPPED_NAME_BYTES: usize = 64;

/// Each tool's argument names, from the daemon's `tools/list`.
pub(super) type ArgumentNames = Arc<HashMap<String, HashSet<String>>>;

/// What the request handlers share.
pub(super) struct Shared {
    /// The daemon session's connection: from the start when the caller opened the session,
    /// else once `initialize` opened it.
    client: OnceLock<Client>,
    /// Until `initialize` opens the session: the connection made at the start (which the daemon
    /// closes when no session is opened on it in time; another is made then).
    probe: Mutex<Option<Client>>,
    /// The daemon's socket.
    pub(super) socket: PathBuf,
    /// The change notices of a session `initialize` just opened, for the server to relay.
    pending_changes: Mutex<Option<Notifications>>,
    /// Where the session comes from, until `initialize` takes it.
    setup: Mutex<Option<Setup>>,
    /// Whether results carry `structuredContent` (and tools their `outputSchema`).
    pub(super) structured: bool,
    /// Serialized messages for the output.
    pub(super) out: mpsc::Sender<String>,
    state: Mutex<State>,
    /// Why the session could not be opened at `initialize`: the server stops.
    refusal: Mutex<Option<ClientError>>,
    /// The daemon tools' argument names, once known (arguments no schema names are dropped).
    arguments: Mutex<Option<ArgumentNames>>,
    /// The argument names already reported as dropped (each is reported once).
    dropped_arguments: Mutex<DroppedArguments>,
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
    /// Whether the daemon session is open (it is closed politely at the end).
    pub(super) session_open: bool,
    /// Set while closing the session at the end: the hang-up that follows is no loss.
    pub(super) closing: bool,
    /// Change notices dropped because the output was not read fast enough.
    pub(super) dropped: u64,
}

impl Shared {
    /// The state of a server that has read nothing yet.
    pub(super) fn new(
        client: Client,
        setup: Setup,
        structured: bool,
        out: mpsc::Sender<String>,
        diagnostics: Diagnostics,
    ) -> Self {
        let state = State { session_open: matches!(setup, Setup::Opened(_)), ..State::default() };
        let socket = client.socket().to_path_buf();
        let (opened, probe) = match setup {
            Setup::Opened(_) => (OnceLock::from(client), None),
            Setup::Deferred(_) => (OnceLock::new(), Some(client)),
        };
        Self {
            client: opened,
            probe: Mutex::new(probe),
            socket,
            pending_changes: Mutex::new(None),
            setup: Mutex::new(Some(setup)),
            structured,
            out,
            state: Mutex::new(state),
            refusal: Mutex::new(None),
            arguments: Mutex::new(None),
            dropped_arguments: Mutex::new(DroppedArguments::default()),
            running: Mutex::new(HashMap::new()),
            diagnostics,
        }
    }

    /// The daemon session's connection, once there is a session.
    pub(super) fn client(&self) -> Option<&Client> {
        self.client.get()
    }

    /// The connection made at the start, taken by the `initialize` that opens the session.
    pub(super) fn take_probe(&self) -> Option<Client> {
        self.probe.lock().unwrap_or_else(PoisonError::into_inner).take()
    }

    /// Keeps the connection of the session `initialize` opened, and its change notices for the
    /// server to relay.
    pub(super) fn opened(&self, client: Client, changes: Notifications) {
        let _ = self.client.set(client);
        *self.pending_changes.lock().unwrap_or_else(PoisonError::into_inner) = Some(changes);
        self.lock_state().session_open = true;
    }

    /// The change notices of a session just opened, once.
    pub(super) fn take_pending_changes(&self) -> Option<Notifications> {
        self.pending_changes.lock().unwrap_or_else(PoisonError::into_inner).take()
    }

    /// Where the session comes from, taken by the one `initialize` that uses it.
    pub(super) fn take_setup(&self) -> Option<Setup> {
        self.setup.lock().unwrap_or_else(PoisonError::into_inner).take()
    }

    /// Records that the session could not be opened: the server stops.
    pub(super) fn refused(&self, error: ClientError) {
        *self.refusal.lock().unwrap_or_else(PoisonError::into_inner) = Some(error);
    }

    /// Why the session could not be opened, once.
    pub(super) fn take_refusal(&self) -> Option<ClientError> {
        self.refusal.lock().unwrap_or_else(PoisonError::into_inner).take()
    }

    /// The tools' argument names, if known yet.
    pub(super) fn argument_names(&self) -> Option<ArgumentNames> {
        self.arguments.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Keeps the tools' argument names from a daemon `tools/list` result.
    pub(super) fn learn_arguments(&self, tools: &[Value]) -> ArgumentNames {
        let names: HashMap<String, HashSet<String>> = tools
            .iter()
            .filter_map(|tool| {
                let name = tool.get("name")?.as_str()?;
                let properties = tool.get("inputSchema")?.get("properties")?.as_object()?;
                Some((name.to_owned(), properties.keys().cloned().collect()))
            })
            .collect();
        let names = Arc::new(names);
        *self.arguments.lock().unwrap_or_else(PoisonError::into_inner) = Some(Arc::clone(&names));
        names
    }

    /// Says that `argument` of `tool` was dropped, when [`DroppedArguments::note`] has something
    /// to say.
    pub(super) fn report_drop(&self, tool: &str, argument: &str) {
        let note = self.dropped_arguments.lock().unwrap_or_else(PoisonError::into_inner).note(tool, argument);
        if let Some(note) = note {
            self.diagnose(&note);
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

/// The arguments dropped so far (names no tool schema gives, which a client added), by tool:
/// each said once in the diagnostics. Bounded whatever the client sends: at most
/// [`MAX_REPORTED_DROPS`] names, each cut to its first [`MAX_DROPPED_NAME_BYTES`] bytes (names
/// alike that far count as one), and shown escaped.
#[derive(Debug, Default)]
pub(super) struct DroppedArguments {
    /// `(tool, name cut)` of each name said.
    said: HashSet<(String, String)>,
    /// Whether a name past the [`MAX_REPORTED_DROPS`] was met (and that said, once).
    full: bool,
}

impl DroppedArguments {
    /// The diagnostic for dropping `argument` of `tool`: the name (cut, escaped) the first time
    /// it is met; once [`MAX_REPORTED_DROPS`] names are remembered, that the others go unsaid,
    /// once; else nothing.
    pub(super) fn note(&mut self, tool: &str, argument: &str) -> Option<String> {
        let mut end = argument.len().min(MAX_DROPPED_NAME_BYTES);
        while !argument.is_char_boundary(end) {
            end -= 1;
        }
        let cut = &argument[..end];
        let key = (tool.to_owned(), cut.to_owned());
        if self.said.contains(&key) {
            return None;
        }
        if self.said.len() >= MAX_REPORTED_DROPS {
            if self.full {
                return None;
            }
            self.full = true;
            return Some(format!(
                "ignoring more arguments that no schema names; past {MAX_REPORTED_DROPS} names they \
                 are not said"
            ));
        }
        self.said.insert(key);
        let longer = if end < argument.len() {
            format!(" (the first {MAX_DROPPED_NAME_BYTES} bytes of a {}-byte name)", argument.len())
        } else {
            String::new()
        };
        Some(format!(
            "ignoring the argument \"{}\"{longer} of {}, which its schema does not name (the MCP \
             client added it)",
            escape_field(cut),
            escape_field(tool)
        ))
    }

    /// Bytes of the names remembered (each name and its tool's, as stored).
    #[cfg(test)]
    fn remembered_bytes(&self) -> usize {
        self.said.iter().map(|(tool, name)| tool.capacity() + name.capacity()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_of_huge_names_is_remembered_and_said_within_bounds() {
        let mut dropped = DroppedArguments::default();
        let tail = "\u{1b}".repeat(1 << 20);
        let mut said = Vec::new();
        for i in 0..1000 {
            let name = format!("{i:03}{tail}");
            // Each name twice: said the first time only.
            for _ in 0..2 {
                said.extend(dropped.note("read", &name));
            }
        }
        // 64 names, then one line saying the rest go unsaid.
        assert_eq!(said.len(), MAX_REPORTED_DROPS + 1, "{:?}", &said[..3]);
        assert!(said[MAX_REPORTED_DROPS].contains("past 64 names they are not said"), "{said:?}");
        let longest = said.iter().map(String::len).max().unwrap_or(0);
        // 64 bytes, each `\x1b` at worst, and the sentence around them.
        assert!(longest <= 4 * MAX_DROPPED_NAME_BYTES + 200, "{longest}: {}", said[0]);
        assert!(!said.iter().any(|line| line.contains('\u{1b}')), "{}", said[0]);
        assert!(
            said[0].starts_with(&format!(
                "ignoring the argument \"000{}\" (the first 64 bytes of a 1048579-byte name) of read,",
                r"\x1b".repeat(61)
            )),
            "{}",
            said[0]
        );
        assert!(dropped.remembered_bytes() <= MAX_REPORTED_DROPS * (MAX_DROPPED_NAME_BYTES + 8));

        // Cut on a character boundary; a short name whole.
        let mut dropped = DroppedArguments::default();
        let wide = format!("{}é", "a".repeat(63));
        let note = dropped.note("grep", &wide).unwrap_or_default();
        assert!(note.contains(&format!("\"{}\" (the first 64 bytes", "a".repeat(63))), "{note}");
        let note = dropped.note("grep", "wait_for_previous").unwrap_or_default();
        assert!(note.starts_with("ignoring the argument \"wait_for_previous\" of grep, "), "{note}");
        assert_eq!(dropped.note("grep", "wait_for_previous"), None);
        assert!(dropped.note("read", "wait_for_previous").is_some(), "each tool's own");
    }
}
