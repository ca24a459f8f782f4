//! One connection's driver: read frames, admit calls in order, serve requests concurrently,
//! write every outgoing message through one bounded queue (or, when that queue is empty and
//! nothing is partly written, straight to the socket).
//!
//! Ordering and gating happen in the reader, one frame at a time: `initialize` and `shutdown`
//! run inline (so a request pipelined right behind `initialize` already sees the session
//! ready); every other call is polled once in the reader and becomes a task of its own only if
//! that poll did not finish it (see [`run_or_spawn`]), so calls may answer out of order, as
//! JSON-RPC allows. A warm read finishes in that poll: no spawn, no wake-up of another worker.
//! The price is that the connection's next frame waits for that first poll, so handlers do
//! only bounded work before their first `.await` (anything slow goes to the blocking pool).
//!
//! Writing: one writer task per connection drains the queue. An answer produced while the
//! connection holds no outgoing bytes at all (nothing queued, in the writer's hands, partly
//! written or reserved) is written directly with a non-blocking write by whoever produced it
//! (usually the reader), saving the hop to the writer; what the socket does not take goes to
//! the writer, ahead of anything queued later, and stays counted in the budget until written
//! (see [`WriteSide`]). Nothing ever overtakes a message already queued or partly written.
//!
//! Backpressure, so that no client can make the daemon buffer without bound: at most
//! `max_concurrent_requests` calls of one connection are in flight, batch entries included (the
//! reader waits for a permit before reading the next frame), and the outgoing queue is bounded
//! in messages (`max_queued_messages`) and in bytes, per connection and daemon-wide (see
//! [`crate::session::budget`]): a response waits for room, a notification is dropped, and a connection
//! at its byte budget is not read until its client reads. A client that never reads therefore
//! stalls only itself, and the kernel's socket buffer throttles its writes.
//!
//! Slow clients: a connection must complete `initialize` within `initialize_timeout`; a frame
//! that has started to arrive must not go `frame_timeout` without a byte; a large frame reserves
//! its length from the daemon-wide budget of partly received bytes before its body is read.
//! The first two close the connection (the slot goes back to honest clients); the last makes the
//! connection wait unread, because closing would punish an honest client for sending a big
//! write while others hold the budget, and stalled holders are closed by the frame timeout.
//!
//! A client that goes away (closes its end altogether, not only its writing half) can read no
//! answer: its requests in flight are cancelled, as `$/cancelRequest` would (a search stops at
//! once, a request waiting for a slot or a gate gives up, work that started runs to its end).
//! The reader sees it at the end of the stream, and while it is not reading (every call in
//! flight, or the connection at its byte budget) looks every [`GONE_POLL`](conn::GONE_POLL); so does the
//! connection while it waits for a half-closed client's requests to finish.

mod batch;
mod conn;
mod dispatch;
mod reader;
#[cfg(test)]
mod tests;
mod writer;

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use filectx_protocol::error::REQUEST_TOO_BIG;
use filectx_protocol::{CodecError, Frame};
use jsonrpsee::core::server::MethodSink;
use jsonrpsee::types::{ErrorObject, Id};
use serde_json::value::RawValue;
use tokio::net::UnixStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use self::conn::{Conn, End};
use self::dispatch::Admission;
use self::reader::{FrameReader, ReadError, initialize_deadline};
use self::writer::{WriteSide, forward, write_loop};
use super::message::{self, Incoming};
use crate::json::Json;
use crate::session::budget::{ConnBudget, Outgoing};
use crate::session::owners::{OwnerLimits, Owners};
use crate::session::{Phase, Session};

pub(crate) use self::conn::Shared;

/// Messages jsonrpsee's subscription sink may hold before they are budgeted: subscription
/// answers (small) and stream chunks, whose bytes the stream reserved before sending them.
const SINK_CAPACITY: usize = 16;

/// Polls a call's future once, here in the reader, and spawns it only if that poll did not
/// finish it. A warm read is answered and queued within its first poll, so it never becomes a
/// task: no spawn, no wake-up of another worker, and the reader goes straight on to the next
/// frame. A call that waits on anything (the blocking pool, a gate, room in the queue) returns
/// `Pending` and continues as a task of its own, with what it set up in that first poll (its
/// permit, its cancellation entry); it will be polled again by its task, whose waker replaces
/// the reader's, so the reader at most sees one spurious wake-up.
///
/// The price: that first poll runs on the reader, so the connection's next frame is not read
/// until it returns. Handlers therefore do only bounded work before their first `.await`
/// (a warm read of at most one window; anything slower runs on the blocking pool), and tokio's
/// cooperative budget makes a long inline run yield. A panic in that poll is caught here, like
/// a panicking task would be: the call is dropped (its permit and cancellation entry with it)
/// and the connection goes on.
async fn run_or_spawn<F>(tasks: &TaskTracker, call: F)
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let mut call = Box::pin(call.in_current_span());
    let first = std::future::poll_fn(|cx| {
        std::task::Poll::Ready(std::panic::catch_unwind(AssertUnwindSafe(|| call.as_mut().poll(cx))))
    })
    .await;
    match first {
        Ok(std::task::Poll::Ready(())) => {}
        Ok(std::task::Poll::Pending) => {
            tasks.spawn(call);
        }
        Err(_) => tracing::error!("a call panicked outside its handler; dropped"),
    }
}

/// Serves one accepted, authorised connection until it ends or the daemon shuts down.
pub(crate) async fn serve(
    stream: UnixStream,
    shared: Arc<Shared>,
    conn_id: usize,
    shutdown: CancellationToken,
) {
    let session_id = format!("{}-{conn_id}", std::process::id());
    let span = tracing::info_span!("session", id = %session_id);
    serve_inner(stream, shared, conn_id, session_id, shutdown).instrument(span).await;
}

async fn serve_inner(
    stream: UnixStream,
    shared: Arc<Shared>,
    conn_id: usize,
    session_id: String,
    shutdown: CancellationToken,
) {
    let mut served = Served::open(stream, shared, conn_id, session_id);
    tracing::debug!("connection opened");
    let end = served.read(&shutdown).await;
    served.close(end).await;
}

/// A connection being served: its [`Conn`], its reader, and the tasks and tokens its end
/// stops.
struct Served {
    conn: Arc<Conn>,
    frames: FrameReader,
    /// The connection's outgoing bytes, against its budget.
    budget: Arc<ConnBudget>,
    /// The same semaphore as the connection's `inflight`.
    inflight: Arc<Semaphore>,
    initialize_by: Instant,
    /// The calls that run as tasks of their own.
    tasks: TaskTracker,
    writer: tokio::task::JoinHandle<()>,
    /// Lets the writer drain the queue and close.
    writer_stop: CancellationToken,
    /// Drops the queue at once.
    writer_kill: CancellationToken,
    forwarder: tokio::task::JoinHandle<()>,
}

/// What the reader does before it reads the next frame.
enum Turn {
    /// Read it, holding this permit if it has one already.
    Read(Option<OwnedSemaphorePermit>),
    /// Look again (the session became a gate meanwhile).
    Again,
    /// Stop reading.
    Stop(End),
}

impl Served {
    /// Sets up the connection's session, writer and subscription forwarder.
    fn open(stream: UnixStream, shared: Arc<Shared>, conn_id: usize, session_id: String) -> Self {
        let config = &shared.config;
        let initialize_by = Instant::now() + config.initialize_timeout;
        let (read_half, write_half) = stream.into_split();
        let (out_tx, out_rx) = mpsc::channel::<Json>(config.max_queued_messages.max(1));
        let budget = shared.outgoing.open();
        let out = Outgoing::new(out_tx, budget.clone());
        let writer_stop = CancellationToken::new();
        let writer_kill = CancellationToken::new();
        let write_side = Arc::new(WriteSide::new(write_half));
        let writer = tokio::spawn(
            write_loop(write_side.clone(), out_rx, budget.clone(), writer_stop.clone(), writer_kill.clone())
                .in_current_span(),
        );
        let (sink_tx, sink_rx) = mpsc::channel::<Box<RawValue>>(SINK_CAPACITY);
        let forwarder = tokio::spawn(forward(sink_rx, out.clone()).in_current_span());

        let limits = OwnerLimits { max_owners: config.max_owners, max_observed: config.max_observed_files };
        let owners =
            Owners::new(session_id.clone(), limits, Some(shared.watch.clone()), shared.stats.clone())
                .bounded(shared.records.session());
        let session = Arc::new(Session::new(
            session_id.clone(),
            out.clone(),
            config.max_subscriptions,
            owners,
            shared.stats.clone(),
        ));
        shared.watch.register(&session_id, Arc::downgrade(&session));
        let max_response = u32::try_from(config.max_frame_bytes).unwrap_or(u32::MAX);
        let inflight = Arc::new(Semaphore::new(config.max_concurrent_requests.max(1)));
        let frames = FrameReader::new(read_half, config, shared.partial.clone());
        let conn = Arc::new(Conn {
            shared: shared.clone(),
            session,
            conn_id,
            sink: MethodSink::new_with_limit(sink_tx, max_response),
            out,
            write_side,
            inflight: inflight.clone(),
            cancels: std::sync::Mutex::default(),
            gone: CancellationToken::new(),
        });
        let tasks = TaskTracker::new();
        Self {
            conn,
            frames,
            budget,
            inflight,
            initialize_by,
            tasks,
            writer,
            writer_stop,
            writer_kill,
            forwarder,
        }
    }

    /// Reads and serves frames until the reader must stop; says why.
    async fn read(&mut self, shutdown: &CancellationToken) -> End {
        loop {
            let permit = match self.turn(shutdown).await {
                Turn::Read(permit) => permit,
                Turn::Again => continue,
                Turn::Stop(end) => return end,
            };
            let frame = tokio::select! {
                biased;
                () = shutdown.cancelled() => return End::DaemonShutdown,
                () = initialize_deadline(&self.conn.session, self.initialize_by) => return End::InitializeTimeout,
                frame = self.frames.next() => frame,
            };
            // Looked at again: the session may have become a gate while the reader waited.
            if self.conn.session.outbound().active()
                && let Some(Ok(Frame::Message(body))) = &frame
                && let Some((id, answer)) = message::response(body)
            {
                self.conn.route(id, answer);
                continue;
            }
            let permit = match permit {
                Some(permit) => permit,
                None => {
                    let permit = tokio::select! {
                        biased;
                        () = shutdown.cancelled() => return End::DaemonShutdown,
                        permit = self.inflight.clone().acquire_owned() => match permit {
                            Ok(permit) => permit,
                            Err(_) => return End::DaemonShutdown,
                        },
                    };
                    if let Some(end) =
                        self.conn.wait_below_budget(&self.budget, shutdown, self.initialize_by).await
                    {
                        return end;
                    }
                    permit
                }
            };
            // Answering may wait for room in the outgoing queue; a client that sends requests
            // before `initialize` and never reads their answers must still meet the deadline.
            let outcome = tokio::select! {
                biased;
                () = initialize_deadline(&self.conn.session, self.initialize_by) => Some(End::InitializeTimeout),
                outcome = serve_frame(&self.conn, frame, permit, &self.tasks) => outcome,
            };
            if let Some(end) = outcome {
                return end;
            }
        }
    }

    /// Waits, before a frame is read, for what reading it needs. A gate's connection reads
    /// first and routes responses to the daemon's own requests at once, without a permit and
    /// whatever its budgets; it holds at most one other frame while that waits for its permit.
    /// Every other connection is read only when it has a permit and room under its budgets.
    async fn turn(&self, shutdown: &CancellationToken) -> Turn {
        let conn = &self.conn;
        if conn.session.outbound().active() {
            return Turn::Read(None);
        }
        // Most frames find a permit and room at once: take them without a select (and its
        // registrations) when nothing the select puts first could fire — the daemon is not
        // shutting down and the session is past `initialize`, so its deadline never comes.
        if conn.session.phase() != Phase::Uninitialized
            && !shutdown.is_cancelled()
            && !self.budget.over_budget()
            && let Ok(admitted) = self.inflight.clone().try_acquire_owned()
        {
            return Turn::Read(Some(admitted));
        }
        let admitted = tokio::select! {
            biased;
            () = shutdown.cancelled() => return Turn::Stop(End::DaemonShutdown),
            () = initialize_deadline(&conn.session, self.initialize_by) => return Turn::Stop(End::InitializeTimeout),
            permit = self.inflight.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                // The semaphore is never closed; treat it like a daemon shutdown if it were.
                Err(_) => return Turn::Stop(End::DaemonShutdown),
            },
            () = conn.session.outbound().activated() => return Turn::Again,
            // Every call in flight: the end of the stream is not read until one finishes.
            () = conn.client_gone() => return Turn::Stop(End::Gone),
        };
        match conn.wait_below_budget(&self.budget, shutdown, self.initialize_by).await {
            Some(end) => Turn::Stop(end),
            None => Turn::Read(Some(admitted)),
        }
    }

    /// Ends the connection the reader stopped for `end`: the daemon's requests to the client
    /// fail, the client is told why when the daemon closes it, the calls in flight finish (or
    /// are cancelled once the client is gone), and the writer drains the queue and closes.
    async fn close(self, end: End) {
        let Self { conn, frames, budget, tasks, writer, writer_stop, writer_kill, forwarder, .. } = self;
        // Requests the daemon sent this client fail now (a gate's pending intents are
        // refused), so that no request of this connection waits for an answer that can no
        // longer come.
        conn.session.outbound().close();
        // Whether the client may have gone: then its requests stop once it has (see the module
        // docs); a client that only half-closed still reads their answers.
        let may_be_gone = matches!(
            end,
            End::Eof | End::Gone | End::Codec(CodecError::Io(_) | CodecError::TruncatedFrame { .. })
        );
        let kill = conn.say_why(&end).await;
        drop(frames);
        if kill {
            // Closed by the daemon: give the error frame a moment to leave, then drop whatever
            // is still queued, so waiting senders give up and the slot is freed.
            let grace = tokio::time::sleep(Duration::from_millis(100));
            tokio::pin!(grace);
            tokio::select! {
                () = &mut grace => {}
                () = budget.wait_empty() => {}
            }
            writer_kill.cancel();
        }
        // Let in-flight requests finish and their responses be queued; the daemon bounds this
        // wait on shutdown. Then the writer drains the queue and closes.
        tasks.close();
        if may_be_gone {
            conn.finish_unless_gone(&tasks).await;
        } else {
            tasks.wait().await;
        }
        writer_stop.cancel();
        drop(conn);
        if let Err(err) = writer.await {
            tracing::error!(%err, "connection writer failed");
        }
        budget.close();
        forwarder.abort();
        tracing::debug!("connection closed");
    }
}

/// Serves one frame the reader read (`None`: the end of the stream) under `permit`; `Some`
/// when the reader must stop.
async fn serve_frame(
    conn: &Arc<Conn>,
    frame: Option<Result<Frame, ReadError>>,
    permit: OwnedSemaphorePermit,
    tasks: &TaskTracker,
) -> Option<End> {
    match frame {
        None => Some(End::Eof),
        Some(Err(ReadError::Codec(err))) => Some(End::Codec(err)),
        Some(Err(ReadError::Stalled { buffered })) => Some(End::Stalled { buffered }),
        Some(Ok(Frame::Oversized { length, limit })) => {
            tracing::warn!(length, limit, "request frame over the size limit skipped");
            let error = ErrorObject::owned(
                REQUEST_TOO_BIG,
                format!("Request is too big: {length} bytes exceeds the frame limit of {limit} bytes"),
                Some(serde_json::json!({"length": length, "limit": limit})),
            );
            conn.send(message::error_response(Id::Null, error)).await;
            None
        }
        Some(Ok(Frame::Message(body))) => conn.handle_frame(body, permit, tasks).await.then_some(End::Exit),
    }
}

impl Conn {
    /// Handles one frame body. Returns true when the client asked to close the connection.
    async fn handle_frame(
        self: &Arc<Self>,
        body: Bytes,
        permit: OwnedSemaphorePermit,
        tasks: &TaskTracker,
    ) -> bool {
        let incoming = match message::classify(&body) {
            Ok(incoming) => incoming,
            Err(response) => {
                self.send(response).await;
                return false;
            }
        };
        match incoming {
            Incoming::Single(raw) => match self.admit(message::parse_call(raw)) {
                Admission::Inline(call) => {
                    let reply = self.run(call).await;
                    self.send_reply(reply).await;
                }
                Admission::Spawn(call) => {
                    let conn = self.clone();
                    run_or_spawn(tasks, async move {
                        let reply = conn.run(call).await;
                        conn.send_reply(reply).await;
                        drop(permit);
                    })
                    .await;
                }
                Admission::Notify(call) => {
                    let conn = self.clone();
                    run_or_spawn(tasks, async move {
                        let _ = conn.run(call).await;
                        drop(permit);
                    })
                    .await;
                }
                Admission::Respond(json) => {
                    self.send(json).await;
                }
                Admission::Exit => return true,
                Admission::Ignore => {}
            },
            Incoming::Batch(entries) => return self.handle_batch(entries, permit, tasks).await,
        }
        false
    }
}
