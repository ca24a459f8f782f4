//! One connection's state while it is served ([`Conn`]), what every connection shares
//! ([`Shared`]), why a reader stops ([`End`]), and the connection's ways to send and to see its
//! client go.

use std::sync::Arc;
use std::time::Duration;

use filectx_protocol::CodecError;
use filectx_protocol::error::{PARSE_ERROR, SERVER_NOT_INITIALIZED};
use jsonrpsee::core::id_providers::RandomIntegerIdProvider;
use jsonrpsee::core::server::{MethodResponse, MethodResponseNotifyTx, MethodSink, Methods};
use jsonrpsee::types::{ErrorObject, Id};
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::reader::initialize_deadline;
use super::writer::WriteSide;
use crate::config::Config;
use crate::context::ledger::Ledgers;
use crate::json::Json;
use crate::session::Session;
use crate::session::budget::{ConnBudget, Outgoing, OutgoingBudget};
use crate::stats::Stats;
use crate::transport::incoming::PartialBudget;
use crate::transport::message;
use crate::watch::WatchHub;

/// What every connection shares: the method table, configuration and counters.
#[derive(Debug)]
pub(crate) struct Shared {
    pub methods: Methods,
    pub config: Config,
    pub stats: Arc<Stats>,
    pub id_provider: RandomIntegerIdProvider,
    pub watch: Arc<WatchHub>,
    /// Outgoing bytes queued, over all connections.
    pub outgoing: Arc<OutgoingBudget>,
    /// Bytes of partly received frames, over all connections.
    pub partial: Arc<PartialBudget>,
    /// The bytes sessions' records hold: each session's ledger comes from here.
    pub records: Arc<Ledgers>,
}

impl Shared {
    /// What every connection shares, with the budgets `config` sets.
    pub fn new(
        methods: Methods,
        config: Config,
        stats: Arc<Stats>,
        watch: Arc<WatchHub>,
        records: Arc<Ledgers>,
    ) -> Self {
        let outgoing = OutgoingBudget::new(
            config.max_total_queued_bytes,
            config.max_queued_bytes,
            config.max_connections,
        );
        let partial = PartialBudget::new(config.max_partial_frame_bytes);
        Self {
            methods,
            config,
            stats,
            id_provider: RandomIntegerIdProvider,
            watch,
            outgoing,
            partial,
            records,
        }
    }
}

/// One connection's state while it is served.
pub(super) struct Conn {
    pub(super) shared: Arc<Shared>,
    pub(super) session: Arc<Session>,
    pub(super) conn_id: usize,
    /// Responses go here; `send` waits for room, which is what stalls a non-reading client.
    pub(super) out: Outgoing,
    /// The socket, for answers written directly while the queue is empty and the writer idle.
    pub(super) write_side: Arc<WriteSide>,
    /// jsonrpsee subscriptions' way into the same queue (through [`forward`](super::writer::forward), which budgets it).
    pub(super) sink: MethodSink,
    /// Calls of this connection in flight: the reader takes one per frame, a batch one more
    /// per entry it runs beside the first.
    pub(super) inflight: Arc<Semaphore>,
    /// The cancellation of each request in flight, by id (as many as calls in flight):
    /// `$/cancelRequest` trips it, handlers look at it (see [`crate::rpc::Cancel`]).
    pub(super) cancels: std::sync::Mutex<std::collections::HashMap<Id<'static>, CancellationToken>>,
    /// Cancelled when the client is gone: every request's cancellation is a child of it (so a
    /// request with a null or repeated id is cancelled too).
    pub(super) gone: CancellationToken,
}

/// How often a connection that is not reading its client (every call in flight, or at its
/// byte budget), or waits for a half-closed client's requests to finish, looks whether the
/// client has gone altogether.
pub(super) const GONE_POLL: Duration = Duration::from_millis(100);

/// A response ready to be queued, and the subscription machinery's wish to hear when it was.
pub(super) struct Reply {
    pub(super) json: Json,
    pub(super) on_sent: Option<MethodResponseNotifyTx>,
    /// jsonrpsee's subscription `accept`/`reject` already queued this response themselves.
    pub(super) already_sent: bool,
}

impl Reply {
    pub(super) fn plain(json: Json) -> Self {
        Self { json, on_sent: None, already_sent: false }
    }

    pub(super) fn from_response(response: MethodResponse) -> Self {
        let (json, on_sent, _) = response.into_parts();
        Self { json: Json::from(json), on_sent, already_sent: false }
    }
}

/// Why the reader stopped.
#[derive(Debug)]
pub(super) enum End {
    Eof,
    /// The client closed its end altogether while the reader was not reading.
    Gone,
    Exit,
    DaemonShutdown,
    Codec(CodecError),
    /// `initialize` was not completed within the deadline.
    InitializeTimeout,
    /// A frame stopped arriving half-way.
    Stalled {
        buffered: usize,
    },
}

impl Conn {
    /// Resolves once the client has gone altogether (looked at every [`GONE_POLL`]).
    pub(super) async fn client_gone(&self) {
        loop {
            tokio::time::sleep(GONE_POLL).await;
            if self.write_side.peer_gone() {
                return;
            }
        }
    }

    /// Waits for the requests in flight to end; cancels them all once the client is gone.
    pub(super) async fn finish_unless_gone(&self, tasks: &TaskTracker) {
        let finished = tasks.wait();
        tokio::pin!(finished);
        if !self.write_side.peer_gone() {
            tokio::select! {
                () = &mut finished => return,
                () = self.client_gone() => {}
            }
        }
        if !tasks.is_empty() {
            tracing::debug!(requests = tasks.len(), "client gone: its requests in flight are cancelled");
        }
        self.gone.cancel();
        finished.await;
    }

    /// Waits until the connection is under its outgoing byte budget; `Some` when the reader
    /// must stop instead.
    pub(super) async fn wait_below_budget(
        &self,
        budget: &ConnBudget,
        shutdown: &CancellationToken,
        initialize_by: Instant,
    ) -> Option<End> {
        if budget.over_budget() {
            tracing::debug!(
                limit = self.shared.config.max_queued_bytes,
                "outgoing bytes at the budget; not reading until the client reads"
            );
        }
        tokio::select! {
            biased;
            () = shutdown.cancelled() => Some(End::DaemonShutdown),
            () = initialize_deadline(&self.session, initialize_by) => Some(End::InitializeTimeout),
            () = budget.wait_below_budget() => None,
            // Not reading: the end of the stream is not seen until the client reads.
            () = self.client_gone() => Some(End::Gone),
        }
    }

    /// Hands a client's response to the daemon's request it answers; one that matches none is
    /// dropped and counted.
    pub(super) fn route(&self, id: Option<String>, answer: crate::session::outbound::Answer) {
        let matched = id.as_deref().is_some_and(|id| self.session.outbound().answer(id, answer));
        if !matched {
            tracing::debug!(?id, "a response that matches no request of the daemon was dropped");
            Stats::bump(&self.shared.stats.unmatched_responses);
        }
    }

    /// Queues one message, waiting for room (bytes and a place in the queue). A closed queue
    /// means the client is gone.
    pub(super) async fn send(&self, json: Json) -> bool {
        if self.write_side.try_direct(json.as_bytes(), self.out.budget()) {
            return true;
        }
        self.out.send(json).await
    }

    pub(super) async fn send_reply(&self, reply: Reply) {
        if reply.already_sent {
            return;
        }
        let sent = self.send(reply.json).await;
        if let Some(on_sent) = reply.on_sent {
            on_sent.notify(sent);
        }
    }

    pub(super) fn cancels_lock(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<Id<'static>, CancellationToken>> {
        self.cancels.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Conn {
    /// Says why the reader stopped, in the log and, when the daemon closes the connection for
    /// it, to the client; whether the daemon closes it (the queue is then dropped soon).
    pub(super) async fn say_why(&self, end: &End) -> bool {
        let mut kill = false;
        match &end {
            End::Eof | End::Gone | End::Exit | End::DaemonShutdown => {
                tracing::debug!(reason = ?end, "connection reader stopped")
            }
            End::InitializeTimeout => {
                tracing::warn!(
                    timeout = ?self.shared.config.initialize_timeout,
                    "closing connection: initialize not completed in time"
                );
                let error = ErrorObject::owned(
                    SERVER_NOT_INITIALIZED,
                    format!(
                        "initialize was not completed within {:?} of connecting; closing the connection",
                        self.shared.config.initialize_timeout
                    ),
                    None::<()>,
                );
                // Best effort: a client that does not read must not hold the connection open.
                let _ = self.out.try_send(message::error_response(Id::Null, error));
                kill = true;
            }
            End::Stalled { buffered } => {
                tracing::warn!(
                    buffered,
                    timeout = ?self.shared.config.frame_timeout,
                    "closing connection: a frame stopped arriving half-way"
                );
                let error = ErrorObject::owned(
                    PARSE_ERROR,
                    format!(
                        "a frame stopped arriving for {:?} after {buffered} bytes; closing the connection",
                        self.shared.config.frame_timeout
                    ),
                    None::<()>,
                );
                let _ = self.out.try_send(message::error_response(Id::Null, error));
                kill = true;
            }
            End::Codec(CodecError::TruncatedFrame { buffered }) => {
                tracing::info!(buffered, "client disconnected in the middle of a frame")
            }
            End::Codec(CodecError::Io(err)) => tracing::debug!(%err, "connection lost"),
            End::Codec(err) => {
                tracing::warn!(%err, "closing connection: the stream cannot be resynchronised");
                let error =
                    ErrorObject::owned(PARSE_ERROR, format!("{err}; closing the connection"), None::<()>);
                self.send(message::error_response(Id::Null, error)).await;
            }
        }
        kill
    }
}
