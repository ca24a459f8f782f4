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
//! flight, or the connection at its byte budget) looks every [`GONE_POLL`]; so does the
//! connection while it waits for a half-closed client's requests to finish.

use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use filectx_protocol::error::{
    BATCH_TOO_BIG, INTERNAL_ERROR, PARSE_ERROR, REQUEST_TOO_BIG, SERVER_NOT_INITIALIZED,
};
use filectx_protocol::methods::{CANCEL_REQUEST, EXIT, INITIALIZE, SHUTDOWN};
use filectx_protocol::{CodecError, Frame, LspCodec};
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use jsonrpsee::Extensions;
use jsonrpsee::core::id_providers::RandomIntegerIdProvider;
use jsonrpsee::core::server::{
    ConnectionId, IntoResponse, MethodCallback, MethodResponse, MethodResponseNotifyTx, MethodSink, Methods,
    SubscriptionState,
};
use jsonrpsee::types::error::{ErrorCode, TOO_MANY_SUBSCRIPTIONS_CODE, TOO_MANY_SUBSCRIPTIONS_MSG};
use jsonrpsee::types::{ErrorObject, Id, Params};
use serde_json::value::RawValue;
use tokio::io::AsyncReadExt;
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::time::Instant;
use tokio_util::codec::Decoder;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use super::incoming::PartialBudget;
use super::message::{self, Call, Incoming};
use crate::config::Config;
use crate::context::ledger::Ledgers;
use crate::json::Json;
use crate::session::budget::{ConnBudget, Outgoing, OutgoingBudget};
use crate::session::owners::{OwnerLimits, Owners};
use crate::session::{Phase, Session};
use crate::stats::Stats;
use crate::watch::WatchHub;

/// What every connection shares: the method table, configuration and counters.
#[derive(Debug)]
pub(crate) struct Shared {
    pub methods: Methods,
    /// The methods called past jsonrpsee's wrapper (see [`crate::rpc::Direct`]); `None` in
    /// tests of the driver with a table of their own.
    pub direct: Option<crate::rpc::Direct>,
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
        direct: Option<crate::rpc::Direct>,
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
            direct,
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

/// The most bytes the writer gathers from the queue before one write.
const WRITE_BATCH_BYTES: usize = 64 * 1024;

/// Frames one outgoing message into `buf` (the one place a message becomes wire bytes, for the
/// queue's writer; a direct write frames the same way through [`frame_header`]).
fn frame_into(body: &[u8], buf: &mut BytesMut) {
    let (header, len) = frame_header(body.len());
    buf.reserve(len + body.len());
    buf.extend_from_slice(&header[..len]);
    buf.extend_from_slice(body);
}

/// Room for `Content-Length: <20 digits>\r\n\r\n`.
const HEADER_ROOM: usize = 48;

/// The frame header of a body of `len` bytes (as [`LspCodec`] writes it), and its length.
fn frame_header(len: usize) -> ([u8; HEADER_ROOM], usize) {
    const PREFIX: &[u8] = b"Content-Length: ";
    let mut header = [0u8; HEADER_ROOM];
    let (digits, at) = crate::json::decimal(len as u64);
    let digits = &digits[at..];
    let mut used = 0;
    for part in [PREFIX, digits, b"\r\n\r\n"] {
        header[used..used + part.len()].copy_from_slice(part);
        used += part.len();
    }
    (header, used)
}

/// The socket's write half, shared by the connection's writer task and by whoever has an
/// answer ready while that writer has nothing to do.
///
/// Order: a message is written directly only when its connection holds no outgoing bytes at
/// all ([`ConnBudget::try_reserve_idle`]): nothing queued, nothing in the writer's hands,
/// nothing partly written. Every write to the socket, the writer's and a direct one, happens
/// under `turn`, so two writes never interleave; a direct write the socket took only in part
/// leaves its rest in `turn`, still counted in the budget, and the writer sends that rest
/// before anything else (nothing could be queued ahead of it: the connection held nothing).
struct WriteSide {
    socket: OwnedWriteHalf,
    /// Held around every write to the socket; the rest of a direct write taken only in part.
    turn: std::sync::Mutex<Option<Leftover>>,
    /// Wakes the writer when a rest is waiting in `turn`.
    rest_waiting: tokio::sync::Notify,
}

/// The unwritten rest of a direct write, and the bytes its message holds in the budget.
struct Leftover {
    bytes: Vec<u8>,
    reserved: usize,
}

impl WriteSide {
    fn new(socket: OwnedWriteHalf) -> Self {
        Self { socket, turn: std::sync::Mutex::new(None), rest_waiting: tokio::sync::Notify::new() }
    }

    fn turn(&self) -> std::sync::MutexGuard<'_, Option<Leftover>> {
        // The slot is replaced whole; a panic elsewhere cannot leave it half-written.
        self.turn.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Writes the message `body` as one frame straight to the socket, without waiting, if
    /// the connection holds no outgoing bytes and the socket takes at least part of it now (the
    /// rest goes to the writer). `false`: nothing was written or reserved; queue it instead.
    fn try_direct(&self, body: &[u8], budget: &ConnBudget) -> bool {
        let Ok(mut turn) = self.turn.try_lock() else { return false };
        if turn.is_some() || !budget.try_reserve_idle(body.len()) {
            return false;
        }
        let (header, header_len) = frame_header(body.len());
        let header = &header[..header_len];
        let total = header.len() + body.len();
        let mut written = 0usize;
        while written < total {
            let head = header.get(written..).unwrap_or_default();
            let tail = body.get(written.saturating_sub(header.len())..).unwrap_or_default();
            match self.socket.try_write_vectored(&[std::io::IoSlice::new(head), std::io::IoSlice::new(tail)])
            {
                Ok(0) => break,
                Ok(n) => written += n,
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
                // Full (or broken, which the writer will find too).
                Err(_) => break,
            }
        }
        if written == total {
            budget.release(body.len());
            return true;
        }
        if written == 0 {
            budget.release(body.len());
            return false;
        }
        let mut bytes = Vec::with_capacity(total - written);
        bytes.extend_from_slice(header.get(written..).unwrap_or_default());
        bytes.extend_from_slice(body.get(written.saturating_sub(header.len())..).unwrap_or_default());
        *turn = Some(Leftover { bytes, reserved: body.len() });
        drop(turn);
        self.rest_waiting.notify_one();
        true
    }

    /// Whether the client closed its end of the socket altogether (not only its writing half),
    /// so that nobody can read an answer any more. A look that cannot be made says no.
    fn peer_gone(&self) -> bool {
        use rustix::event::{PollFd, PollFlags, Timespec};
        let mut fds = [PollFd::new(self.socket.as_ref(), PollFlags::empty())];
        let now = Timespec { tv_sec: 0, tv_nsec: 0 };
        matches!(rustix::event::poll(&mut fds, Some(&now)), Ok(ready) if ready > 0)
            && fds[0].revents().intersects(PollFlags::HUP | PollFlags::ERR)
    }

    /// Whether the rest of a direct write waits for the writer.
    fn rest_pending(&self) -> bool {
        self.turn().is_some()
    }

    /// Writes all of `bytes`, one non-blocking write at a time, each under `turn`.
    async fn write_all(&self, mut bytes: &[u8]) -> std::io::Result<()> {
        while !bytes.is_empty() {
            self.socket.writable().await?;
            let written = {
                let _turn = self.turn();
                self.socket.try_write(bytes)
            };
            match written {
                Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
                Ok(n) => bytes = bytes.get(n..).unwrap_or_default(),
                Err(err)
                    if matches!(
                        err.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
                    ) => {}
                Err(err) => return Err(err),
            }
        }
        Ok(())
    }
}

/// One connection's state while it is served.
struct Conn {
    shared: Arc<Shared>,
    session: Arc<Session>,
    conn_id: usize,
    /// Responses go here; `send` waits for room, which is what stalls a non-reading client.
    out: Outgoing,
    /// The socket, for answers written directly while the queue is empty and the writer idle.
    write_side: Arc<WriteSide>,
    /// jsonrpsee subscriptions' way into the same queue (through [`forward`], which budgets it).
    sink: MethodSink,
    /// Calls of this connection in flight: the reader takes one per frame, a batch one more
    /// per entry it runs beside the first.
    inflight: Arc<Semaphore>,
    /// The cancellation of each request in flight, by id (as many as calls in flight):
    /// `$/cancelRequest` trips it, handlers look at it (see [`crate::rpc::Cancel`]).
    cancels: std::sync::Mutex<std::collections::HashMap<Id<'static>, CancellationToken>>,
    /// Cancelled when the client is gone: every request's cancellation is a child of it (so a
    /// request with a null or repeated id is cancelled too).
    gone: CancellationToken,
}

/// How often a connection that is not reading its client (every call in flight, or at its
/// byte budget), or waits for a half-closed client's requests to finish, looks whether the
/// client has gone altogether.
const GONE_POLL: Duration = Duration::from_millis(100);

/// A response ready to be queued, and the subscription machinery's wish to hear when it was.
struct Reply {
    json: Json,
    on_sent: Option<MethodResponseNotifyTx>,
    /// jsonrpsee's subscription `accept`/`reject` already queued this response themselves.
    already_sent: bool,
}

impl Reply {
    fn plain(json: Json) -> Self {
        Self { json, on_sent: None, already_sent: false }
    }

    fn from_response(response: MethodResponse) -> Self {
        let (json, on_sent, _) = response.into_parts();
        Self { json: Json::from(json), on_sent, already_sent: false }
    }
}

/// One entry of a batch, in the order it came.
enum Entry {
    /// Not started yet: the call, and whether it gets an answer (not a notification).
    Run(OwnedCall, bool),
    /// Started; its outcome comes back through the batch's running set.
    Running,
    /// Answered.
    Done(Reply),
    /// Answered past the budget: its response was dropped, the entry gets -32010.
    Dropped(Id<'static>),
    /// A notification that ran, or nothing to answer.
    Silent,
}

/// The position of the first batch entry known to be past the budget: the responses before
/// it (those already complete, counting the others as empty) are more than the budget.
fn past_budget(slots: &[Entry], budget: usize) -> usize {
    // The opening and closing brackets.
    let mut bytes = 2usize;
    for (pos, entry) in slots.iter().enumerate() {
        if let Entry::Done(reply) = entry
            && !reply.already_sent
        {
            bytes += reply.json.len() + 1;
            if bytes > budget {
                return pos;
            }
        }
    }
    usize::MAX
}

/// The id of a serialized response (null if it has none).
fn id_of(json: &Json) -> Id<'static> {
    #[derive(serde::Deserialize)]
    struct WithId<'a> {
        #[serde(borrow)]
        id: Id<'a>,
    }
    serde_json::from_slice::<WithId<'_>>(json.as_bytes()).map_or(Id::Null, |with| with.id.into_owned())
}

/// The answer of a batch entry past the batch's byte budget.
fn batch_cut(id: Id<'static>, budget: usize, ran: bool) -> Json {
    let what = if ran { "it ran, but its response was dropped" } else { "it was not run" };
    let error = ErrorObject::owned(
        BATCH_TOO_BIG,
        format!(
            "The batch's responses exceed its budget of {budget} bytes (--max-batch-response-bytes): \
             {what}; send it again alone or in a smaller batch"
        ),
        Some(serde_json::json!({"limit": budget, "ran": ran})),
    );
    message::error_response(id, error)
}

/// Removes a request's cancellation from its connection when the request is done.
struct CancelEntry<'a> {
    conn: &'a Conn,
    id: Id<'static>,
}

impl Drop for CancelEntry<'_> {
    fn drop(&mut self) {
        self.conn.cancels_lock().remove(&self.id);
    }
}

/// An owned request, detached from the frame it came in, so it can move into a task.
struct OwnedCall {
    id: Id<'static>,
    method: String,
    params: Option<Box<RawValue>>,
}

/// What the reader decided to do with one call.
enum Admission {
    /// Run inside the reader before the next frame is read (`initialize`, `shutdown`).
    Inline(OwnedCall),
    /// Run concurrently.
    Spawn(OwnedCall),
    /// Run a notification's handler; its result is dropped.
    Notify(OwnedCall),
    /// Answer at once with this (an error).
    Respond(Json),
    /// The client asked to close the connection.
    Exit,
    /// Nothing to do (an unknown or premature notification).
    Ignore,
}

/// Why the reader stopped.
#[derive(Debug)]
enum End {
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

/// Messages jsonrpsee's subscription sink may hold before they are budgeted: subscription
/// answers (small) and stream chunks, whose bytes the stream reserved before sending them.
const SINK_CAPACITY: usize = 16;

/// Reads frames off the socket within the daemon's budgets and timeouts.
struct FrameReader {
    socket: OwnedReadHalf,
    codec: LspCodec,
    /// Undecoded bytes: at most a header section, or the body of the frame being received
    /// (whose length a large frame reserved from `partial`).
    buf: BytesMut,
    partial: Arc<PartialBudget>,
    /// The reservation of the frame being received, if it is large.
    reservation: Option<OwnedSemaphorePermit>,
    frame_timeout: Duration,
    eof: bool,
}

/// Why the reader could not produce a frame.
enum ReadError {
    Codec(CodecError),
    Stalled { buffered: usize },
}

/// Room made in the read buffer before each read (the codec grows it further for bodies).
const READ_CHUNK: usize = 8 * 1024;

/// More looks (1 ms apart) for the subscription a cancel names, when the first found none: it
/// may be registered a moment after its id was sent (see `dispatch`).
const UNSUBSCRIBE_RETRIES: usize = 3;

impl FrameReader {
    fn new(socket: OwnedReadHalf, config: &Config, partial: Arc<PartialBudget>) -> Self {
        Self {
            socket,
            codec: LspCodec::new(config.max_frame_bytes),
            buf: BytesMut::with_capacity(READ_CHUNK),
            partial,
            reservation: None,
            frame_timeout: config.frame_timeout,
            eof: false,
        }
    }

    /// The next frame; `None` at a clean end of stream. Only reads the socket while this is
    /// awaited, so whoever awaits it decides when the client is read at all.
    async fn next(&mut self) -> Option<Result<Frame, ReadError>> {
        loop {
            match self.codec.decode(&mut self.buf) {
                Ok(Some(frame)) => {
                    // The body is out of the reader's buffer: its reservation is done.
                    self.reservation = None;
                    return Some(Ok(frame));
                }
                Ok(None) => {}
                Err(err) => return Some(Err(ReadError::Codec(err))),
            }
            if self.eof {
                return match self.codec.decode_eof(&mut self.buf) {
                    Ok(Some(frame)) => Some(Ok(frame)),
                    Ok(None) => None,
                    Err(err) => Some(Err(ReadError::Codec(err))),
                };
            }
            if let Some(length) = self.codec.pending_body()
                && self.reservation.is_none()
                && PartialBudget::counts(length)
            {
                // Wait, unread, until this frame fits the daemon-wide budget; then make room for
                // it in one go (it is paid for).
                self.reservation = self.partial.reserve(length).await;
                self.buf.reserve(length.saturating_sub(self.buf.len()));
            }
            if self.buf.capacity() - self.buf.len() < READ_CHUNK {
                self.buf.reserve(READ_CHUNK);
            }
            let read = if self.codec.between_frames(self.buf.len()) {
                // Idle between frames: an initialized session may stay quiet for as long as it
                // likes.
                self.socket.read_buf(&mut self.buf).await
            } else {
                match tokio::time::timeout(self.frame_timeout, self.socket.read_buf(&mut self.buf)).await {
                    Ok(read) => read,
                    Err(_) => return Some(Err(ReadError::Stalled { buffered: self.buf.len() })),
                }
            };
            match read {
                Ok(0) => self.eof = true,
                Ok(_) => {}
                Err(err) => return Some(Err(ReadError::Codec(CodecError::Io(err)))),
            }
        }
    }
}

/// Resolves at `deadline` while the session is still uninitialized; never otherwise.
async fn initialize_deadline(session: &Session, deadline: Instant) {
    if session.phase() == Phase::Uninitialized {
        tokio::time::sleep_until(deadline).await;
    } else {
        std::future::pending::<()>().await;
    }
}

/// Moves what jsonrpsee's subscription sink queues into the connection's queue, paying for
/// each message with what its stream prepaid and reserving the rest.
async fn forward(mut sink: mpsc::Receiver<Box<RawValue>>, out: Outgoing) {
    loop {
        let json = tokio::select! {
            json = sink.recv() => match json {
                Some(json) => json,
                None => break,
            },
            () = out.closed() => break,
        };
        let json = Json::from(json);
        let n = json.len();
        let prepaid = out.budget().take_prepaid(n);
        let admitted = prepaid == n || out.budget().reserve(n - prepaid).await;
        if !admitted || !out.send_reserved(json).await {
            break;
        }
    }
}

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
    let config = shared.config.clone();
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
    let owners = Owners::new(session_id.clone(), limits, Some(shared.watch.clone()), shared.stats.clone())
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
    tracing::debug!("connection opened");

    let tasks = TaskTracker::new();
    let mut frames = FrameReader::new(read_half, &config, shared.partial.clone());
    let end = loop {
        // A gate's connection reads first and routes responses to the daemon's own requests at
        // once, without a permit and whatever its budgets; it holds at most one other frame
        // while that waits for its permit. Every other connection is read only when it has a
        // permit and room under its budgets.
        let routes = conn.session.outbound().active();
        let mut permit = None;
        if !routes {
            // Most frames find a permit and room at once: take them without a select (and its
            // registrations) when nothing the select puts first could fire — the daemon is not
            // shutting down and the session is past `initialize`, so its deadline never comes.
            if conn.session.phase() != Phase::Uninitialized
                && !shutdown.is_cancelled()
                && !budget.over_budget()
                && let Ok(admitted) = inflight.clone().try_acquire_owned()
            {
                permit = Some(admitted);
            }
        }
        if !routes && permit.is_none() {
            let admitted = tokio::select! {
                biased;
                () = shutdown.cancelled() => break End::DaemonShutdown,
                () = initialize_deadline(&conn.session, initialize_by) => break End::InitializeTimeout,
                permit = inflight.clone().acquire_owned() => match permit {
                    Ok(permit) => Some(permit),
                    // The semaphore is never closed; treat it like a daemon shutdown if it were.
                    Err(_) => break End::DaemonShutdown,
                },
                () = conn.session.outbound().activated() => None,
                // Every call in flight: the end of the stream is not read until one finishes.
                () = conn.client_gone() => break End::Gone,
            };
            let Some(admitted) = admitted else { continue };
            permit = Some(admitted);
            if let Some(end) = conn.wait_below_budget(&budget, &shutdown, initialize_by).await {
                break end;
            }
        }
        let frame = tokio::select! {
            biased;
            () = shutdown.cancelled() => break End::DaemonShutdown,
            () = initialize_deadline(&conn.session, initialize_by) => break End::InitializeTimeout,
            frame = frames.next() => frame,
        };
        // Looked at again: the session may have become a gate while the reader waited.
        if conn.session.outbound().active()
            && let Some(Ok(Frame::Message(body))) = &frame
            && let Some((id, answer)) = message::response(body)
        {
            conn.route(id, answer);
            continue;
        }
        let permit = match permit {
            Some(permit) => permit,
            None => {
                let permit = tokio::select! {
                    biased;
                    () = shutdown.cancelled() => break End::DaemonShutdown,
                    permit = inflight.clone().acquire_owned() => match permit {
                        Ok(permit) => permit,
                        Err(_) => break End::DaemonShutdown,
                    },
                };
                if let Some(end) = conn.wait_below_budget(&budget, &shutdown, initialize_by).await {
                    break end;
                }
                permit
            }
        };
        let step = async {
            match frame {
                None => Some(End::Eof),
                Some(Err(ReadError::Codec(err))) => Some(End::Codec(err)),
                Some(Err(ReadError::Stalled { buffered })) => Some(End::Stalled { buffered }),
                Some(Ok(Frame::Oversized { length, limit })) => {
                    tracing::warn!(length, limit, "request frame over the size limit skipped");
                    let error = ErrorObject::owned(
                        REQUEST_TOO_BIG,
                        format!(
                            "Request is too big: {length} bytes exceeds the frame limit of {limit} bytes"
                        ),
                        Some(serde_json::json!({"length": length, "limit": limit})),
                    );
                    conn.send(message::error_response(Id::Null, error)).await;
                    None
                }
                Some(Ok(Frame::Message(body))) => {
                    conn.handle_frame(body, permit, &tasks).await.then_some(End::Exit)
                }
            }
        };
        // Answering may wait for room in the outgoing queue; a client that sends requests
        // before `initialize` and never reads their answers must still meet the deadline.
        let outcome = tokio::select! {
            biased;
            () = initialize_deadline(&conn.session, initialize_by) => Some(End::InitializeTimeout),
            outcome = step => outcome,
        };
        if let Some(end) = outcome {
            break end;
        }
    };

    // Requests the daemon sent this client fail now (a gate's pending intents are refused), so
    // that no request of this connection waits for an answer that can no longer come.
    conn.session.outbound().close();
    // Whether the client may have gone: then its requests stop once it has (see the module
    // docs); a client that only half-closed still reads their answers.
    let may_be_gone = matches!(
        end,
        End::Eof | End::Gone | End::Codec(CodecError::Io(_) | CodecError::TruncatedFrame { .. })
    );
    let mut kill = false;
    match &end {
        End::Eof | End::Gone | End::Exit | End::DaemonShutdown => {
            tracing::debug!(reason = ?end, "connection reader stopped")
        }
        End::InitializeTimeout => {
            tracing::warn!(
                timeout = ?config.initialize_timeout,
                "closing connection: initialize not completed in time"
            );
            let error = ErrorObject::owned(
                SERVER_NOT_INITIALIZED,
                format!(
                    "initialize was not completed within {:?} of connecting; closing the connection",
                    config.initialize_timeout
                ),
                None::<()>,
            );
            // Best effort: a client that does not read must not hold the connection open.
            let _ = conn.out.try_send(message::error_response(Id::Null, error));
            kill = true;
        }
        End::Stalled { buffered } => {
            tracing::warn!(
                buffered,
                timeout = ?config.frame_timeout,
                "closing connection: a frame stopped arriving half-way"
            );
            let error = ErrorObject::owned(
                PARSE_ERROR,
                format!(
                    "a frame stopped arriving for {:?} after {buffered} bytes; closing the connection",
                    config.frame_timeout
                ),
                None::<()>,
            );
            let _ = conn.out.try_send(message::error_response(Id::Null, error));
            kill = true;
        }
        End::Codec(CodecError::TruncatedFrame { buffered }) => {
            tracing::info!(buffered, "client disconnected in the middle of a frame")
        }
        End::Codec(CodecError::Io(err)) => tracing::debug!(%err, "connection lost"),
        End::Codec(err) => {
            tracing::warn!(%err, "closing connection: the stream cannot be resynchronised");
            let error = ErrorObject::owned(PARSE_ERROR, format!("{err}; closing the connection"), None::<()>);
            conn.send(message::error_response(Id::Null, error)).await;
        }
    }
    drop(frames);
    if kill {
        // Closed by the daemon: give the error frame a moment to leave, then drop whatever is
        // still queued, so waiting senders give up and the slot is freed.
        let grace = tokio::time::sleep(Duration::from_millis(100));
        tokio::pin!(grace);
        tokio::select! {
            () = &mut grace => {}
            () = budget.wait_empty() => {}
        }
        writer_kill.cancel();
    }
    // Let in-flight requests finish and their responses be queued; the daemon bounds this wait
    // on shutdown. Then the writer drains the queue and closes.
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

/// Writes queued messages as frames, gathering whatever is ready into one write, and gives
/// their bytes back to the budget once they are written. The rest of a direct write (see
/// [`WriteSide`]) goes first. `kill` drops the queue at once.
async fn write_loop(
    side: Arc<WriteSide>,
    mut queue: mpsc::Receiver<Json>,
    budget: Arc<ConnBudget>,
    stop: CancellationToken,
    kill: CancellationToken,
) {
    let mut buf = BytesMut::with_capacity(8 * 1024);
    loop {
        let first = tokio::select! {
            biased;
            () = kill.cancelled() => break,
            message = queue.recv() => match message {
                Some(message) => Some(message),
                None if side.rest_pending() => None,
                None => break,
            },
            () = side.rest_waiting.notified() => None,
            () = stop.cancelled() => match queue.try_recv() {
                Ok(message) => Some(message),
                Err(_) if side.rest_pending() => None,
                Err(_) => break,
            },
        };
        let mut budgeted = 0usize;
        // Whatever a direct write left is older than anything queued: it goes first.
        if let Some(rest) = side.turn().take() {
            buf.extend_from_slice(&rest.bytes);
            budgeted += rest.reserved;
        }
        let mut next = first;
        while let Some(message) = next.take() {
            budgeted += message.len();
            frame_into(message.as_bytes(), &mut buf);
            drop(message);
            if buf.len() < WRITE_BATCH_BYTES {
                next = queue.try_recv().ok();
            }
        }
        if buf.is_empty() {
            continue;
        }
        let written = tokio::select! {
            written = side.write_all(&buf) => written,
            () = kill.cancelled() => break,
        };
        if let Err(err) = written {
            tracing::debug!(%err, "client stopped reading; dropping its outgoing queue");
            break;
        }
        budget.release(budgeted);
        buf.clear();
        if buf.capacity() > 4 * WRITE_BATCH_BYTES {
            // One huge response must not pin its buffer for the connection's lifetime.
            buf = BytesMut::with_capacity(8 * 1024);
        }
    }
    // Nothing more will be written: what is still queued goes with the connection, and
    // whoever waits for room must stop waiting.
    queue.close();
    budget.close();
    let _ = side.turn().take();
    // Half-close now, as the write half would when dropped: the connection may still hold the
    // shared side for a while (in-flight calls after a kill), and the client must see the end.
    // Through a duplicate of the descriptor, since the half itself is shared.
    if let Ok(fd) = std::os::fd::AsFd::as_fd(side.socket.as_ref()).try_clone_to_owned() {
        let _ = std::os::unix::net::UnixStream::from(fd).shutdown(std::net::Shutdown::Write);
    }
}

impl Conn {
    /// Resolves once the client has gone altogether (looked at every [`GONE_POLL`]).
    async fn client_gone(&self) {
        loop {
            tokio::time::sleep(GONE_POLL).await;
            if self.write_side.peer_gone() {
                return;
            }
        }
    }

    /// Waits for the requests in flight to end; cancels them all once the client is gone.
    async fn finish_unless_gone(&self, tasks: &TaskTracker) {
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
    async fn wait_below_budget(
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
    fn route(&self, id: Option<String>, answer: crate::session::outbound::Answer) {
        let matched = id.as_deref().is_some_and(|id| self.session.outbound().answer(id, answer));
        if !matched {
            tracing::debug!(?id, "a response that matches no request of the daemon was dropped");
            Stats::bump(&self.shared.stats.unmatched_responses);
        }
    }

    /// Queues one message, waiting for room (bytes and a place in the queue). A closed queue
    /// means the client is gone.
    async fn send(&self, json: Json) -> bool {
        if self.write_side.try_direct(json.as_bytes(), self.out.budget()) {
            return true;
        }
        self.out.send(json).await
    }

    async fn send_reply(&self, reply: Reply) {
        if reply.already_sent {
            return;
        }
        let sent = self.send(reply.json).await;
        if let Some(on_sent) = reply.on_sent {
            on_sent.notify(sent);
        }
    }

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

    /// Handles a batch: calls are admitted in order (inline ones run during admission), the
    /// rest run concurrently within the connection's concurrency limit, and one array of
    /// responses goes back in the entries' order (none if all were notifications), within the
    /// batch's byte budget.
    async fn handle_batch(
        self: &Arc<Self>,
        entries: Vec<&RawValue>,
        permit: OwnedSemaphorePermit,
        tasks: &TaskTracker,
    ) -> bool {
        let max = self.shared.config.max_batch_len;
        if entries.len() > max {
            let error = ErrorObject::owned(
                BATCH_TOO_BIG,
                format!("The batch has {} entries; at most {max} are accepted", entries.len()),
                None::<()>,
            );
            self.send(message::error_response(Id::Null, error)).await;
            return false;
        }
        let mut exit = false;
        let mut slots: Vec<Entry> = Vec::with_capacity(entries.len());
        for raw in entries {
            match self.admit(message::parse_call(raw)) {
                Admission::Inline(call) => slots.push(Entry::Done(self.run(call).await)),
                Admission::Spawn(call) => slots.push(Entry::Run(call, true)),
                Admission::Notify(call) => slots.push(Entry::Run(call, false)),
                Admission::Respond(json) => slots.push(Entry::Done(Reply::plain(json))),
                Admission::Exit => exit = true,
                Admission::Ignore => {}
            }
        }
        let conn = self.clone();
        tasks.spawn(async move { conn.run_batch(slots, permit).await }.in_current_span());
        exit
    }

    /// Runs a batch's entries and sends its response.
    ///
    /// Concurrency: the frame's permit lets one entry run at any time, so a batch larger than
    /// the limit always progresses; every further entry running beside it holds a permit of its
    /// own, so a batch counts against `max_concurrent_requests` like the same calls sent apart.
    ///
    /// Bytes: responses are measured as they complete. The first entry (in order) whose
    /// response would take the array past the budget, and every entry after it, are answered
    /// -32010. An entry known to be past the budget (the responses before it already exceed
    /// it) is not started, and its response is dropped if it was, so the batch never holds much
    /// more than its budget.
    async fn run_batch(self: Arc<Self>, mut slots: Vec<Entry>, permit: OwnedSemaphorePermit) {
        let config = &self.shared.config;
        let budget = config.max_batch_response_bytes.min(config.max_frame_bytes);
        let mut waiting: VecDeque<usize> =
            slots.iter().enumerate().filter(|(_, e)| matches!(e, Entry::Run(..))).map(|(i, _)| i).collect();
        let mut running = FuturesUnordered::new();
        let mut own = Some(permit);
        let mut cut = past_budget(&slots, budget);
        loop {
            // Start what the permits allow, in order, never past the budget.
            while let Some(&pos) = waiting.front() {
                if pos >= cut {
                    break;
                }
                let slot = match own.take() {
                    Some(permit) => permit,
                    None => match self.inflight.clone().try_acquire_owned() {
                        Ok(permit) => permit,
                        Err(_) => break,
                    },
                };
                waiting.pop_front();
                running.push(self.clone().start(&mut slots[pos], pos, slot));
            }
            if running.is_empty() {
                break;
            }
            let can_start = waiting.front().is_some_and(|&pos| pos < cut);
            tokio::select! {
                Some((pos, reply, slot)) = running.next() => {
                    if own.is_none() {
                        own = Some(slot);
                    }
                    slots[pos] = match reply {
                        Some(reply) if pos < cut => Entry::Done(reply),
                        Some(reply) => {
                            if let Some(on_sent) = reply.on_sent {
                                on_sent.notify(false);
                            }
                            Entry::Dropped(id_of(&reply.json))
                        }
                        None => Entry::Silent,
                    };
                    cut = cut.min(past_budget(&slots, budget));
                    for entry in slots.iter_mut().skip(cut) {
                        if let Entry::Done(reply) = entry {
                            let id = id_of(&reply.json);
                            *entry = Entry::Dropped(id);
                        }
                    }
                }
                permit = self.inflight.clone().acquire_owned(), if can_start => {
                    if let (Ok(permit), Some(pos)) = (permit, waiting.pop_front()) {
                        running.push(self.clone().start(&mut slots[pos], pos, permit));
                    }
                }
            }
        }
        self.send_batch(slots, budget).await;
    }

    /// Starts one batch entry; its future yields the entry's position, its reply (none for a
    /// notification) and the permit it ran under.
    fn start(
        self: Arc<Self>,
        entry: &mut Entry,
        pos: usize,
        permit: OwnedSemaphorePermit,
    ) -> impl std::future::Future<Output = (usize, Option<Reply>, OwnedSemaphorePermit)> + use<> {
        let taken = std::mem::replace(entry, Entry::Running);
        async move {
            match taken {
                Entry::Run(call, answer) => {
                    let reply = self.run(call).await;
                    (pos, answer.then_some(reply), permit)
                }
                _ => (pos, None, permit),
            }
        }
    }

    /// Sends a batch's responses in order; past the budget, -32010 for each remaining request.
    async fn send_batch(&self, slots: Vec<Entry>, budget: usize) {
        let mut array = vec![b'['];
        let mut answered = 0usize;
        let mut over = false;
        let mut sent_replies: Vec<Option<MethodResponseNotifyTx>> = Vec::new();
        for entry in slots {
            let (json, on_sent) = match entry {
                // Subscription answers went out on their own (jsonrpsee sends them at accept).
                Entry::Done(reply) if reply.already_sent => continue,
                Entry::Done(reply) => {
                    // +2: a comma, and the closing bracket.
                    if over || array.len() + reply.json.len() + 2 > budget {
                        over = true;
                        if let Some(on_sent) = reply.on_sent {
                            on_sent.notify(false);
                        }
                        (batch_cut(id_of(&reply.json), budget, true), None)
                    } else {
                        (reply.json, reply.on_sent)
                    }
                }
                Entry::Dropped(id) => {
                    over = true;
                    (batch_cut(id, budget, true), None)
                }
                Entry::Run(call, true) => {
                    over = true;
                    (batch_cut(call.id, budget, false), None)
                }
                Entry::Run(_, false) | Entry::Silent | Entry::Running => continue,
            };
            if answered > 0 {
                array.push(b',');
            }
            array.extend_from_slice(json.as_bytes());
            answered += 1;
            sent_replies.push(on_sent);
        }
        if answered == 0 {
            return;
        }
        array.push(b']');
        if over {
            tracing::info!(
                budget,
                entries = answered,
                "batch response over its byte budget; later entries answered -32010"
            );
        }
        // An array of whole responses is one JSON value.
        let sent = self.send(Json::trusted(array)).await;
        for on_sent in sent_replies.into_iter().flatten() {
            on_sent.notify(sent);
        }
    }

    /// Decides, in the reader and in order, what to do with one call.
    fn admit(&self, call: Call<'_>) -> Admission {
        let phase = self.session.phase();
        match call {
            Call::Invalid(id) => Admission::Respond(message::invalid_request(id)),
            Call::Notification(note) => {
                if note.method == EXIT {
                    return Admission::Exit;
                }
                if note.method == CANCEL_REQUEST && phase == Phase::Ready {
                    self.cancel(note.params);
                    return Admission::Ignore;
                }
                if phase != Phase::Ready || self.shared.methods.method(&note.method).is_none() {
                    tracing::debug!(method = %note.method, ?phase, "notification ignored");
                    return Admission::Ignore;
                }
                Admission::Notify(OwnedCall {
                    id: Id::Null,
                    method: note.method.into_owned(),
                    params: note.params.map(ToOwned::to_owned),
                })
            }
            Call::Request(request) => {
                Stats::bump(&self.shared.stats.requests);
                let id = request.id.into_owned();
                match phase {
                    Phase::ShutDown => {
                        return Admission::Respond(message::error_response(
                            id,
                            crate::rpc::error::shut_down(),
                        ));
                    }
                    Phase::Uninitialized if request.method != INITIALIZE => {
                        return Admission::Respond(message::error_response(
                            id,
                            crate::rpc::error::not_initialized(),
                        ));
                    }
                    _ => {}
                }
                let inline = request.method == INITIALIZE || request.method == SHUTDOWN;
                let call = OwnedCall {
                    id,
                    method: request.method.into_owned(),
                    params: request.params.map(|p| p.into_owned()),
                };
                if inline { Admission::Inline(call) } else { Admission::Spawn(call) }
            }
        }
    }

    fn cancels_lock(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<Id<'static>, CancellationToken>> {
        self.cancels.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `$/cancelRequest` `{id}`: trips the cancellation of that request if it is in flight
    /// (unknown ids and malformed params are ignored, as LSP asks of a notification).
    fn cancel(&self, params: Option<&RawValue>) {
        #[derive(serde::Deserialize)]
        struct CancelParams<'a> {
            #[serde(borrow)]
            id: Id<'a>,
        }
        let Some(CancelParams { id }) =
            params.and_then(|p| serde_json::from_str::<CancelParams<'_>>(p.get()).ok())
        else {
            tracing::debug!("$/cancelRequest without an id ignored");
            return;
        };
        let id = id.into_owned();
        match self.cancels_lock().get(&id) {
            Some(token) => {
                tracing::debug!(?id, "request cancelled by the client");
                token.cancel();
            }
            None => tracing::debug!(?id, "$/cancelRequest for no request in flight"),
        }
    }

    /// Runs one call against the method table. A panic in a handler is answered as an internal
    /// error for that call alone.
    async fn run(&self, call: OwnedCall) -> Reply {
        let id = call.id.clone();
        let method = call.method.clone();
        match AssertUnwindSafe(self.dispatch(call)).catch_unwind().await {
            Ok(reply) => reply,
            Err(_) => {
                tracing::error!(%method, "method handler panicked");
                let error = ErrorObject::owned(
                    INTERNAL_ERROR,
                    format!("internal error while serving {method}"),
                    None::<()>,
                );
                Reply::plain(message::error_response(id, error))
            }
        }
    }

    async fn dispatch(&self, call: OwnedCall) -> Reply {
        let OwnedCall { id, method, params } = call;
        let Some((_, callback)) = self.shared.methods.method_with_name(&method) else {
            let error = ErrorObject::owned(
                ErrorCode::MethodNotFound.code(),
                format!("Method not found: {method}"),
                None::<()>,
            );
            return Reply::plain(message::error_response(id, error));
        };
        let params = Params::new(params.as_deref().map(RawValue::get)).into_owned();
        let mut extensions = Extensions::new();
        extensions.insert(self.session.clone());
        let token = self.gone.child_token();
        extensions.insert(crate::rpc::Cancel(token.clone()));
        let _cancel = (id != Id::Null).then(|| {
            self.cancels_lock().insert(id.clone(), token);
            CancelEntry { conn: self, id: id.clone() }
        });
        let max_response = self.shared.config.max_frame_bytes;
        // A response an async handler serialized itself, into the slot its call carries, goes
        // out as those bytes, unparsed.
        let prepared = |extensions: &mut Extensions| {
            let prepared = crate::rpc::Prepared::new(id.clone());
            extensions.insert(prepared.clone());
            prepared
        };
        if let Some(direct) = self.shared.direct.as_ref().filter(|_| crate::rpc::Direct::serves(&method)) {
            // As the table's `Async` callback below, without jsonrpsee's wrapper around it.
            let slot = prepared(&mut extensions);
            let result = direct.file_read(params, extensions).await;
            return match slot.take() {
                Some(json) if result.is_ok() => Reply::plain(message::bounded(id, json, max_response)),
                _ => Reply::from_response(MethodResponse::response(id, result.into_response(), max_response)),
            };
        }
        let conn_id = ConnectionId(self.conn_id);
        let response = match callback {
            MethodCallback::Sync(callback) => callback(id, params, max_response, extensions),
            MethodCallback::Async(callback) => {
                let slot = prepared(&mut extensions);
                let response = callback(id.clone(), params, conn_id, max_response, extensions).await;
                match slot.take() {
                    Some(json) if response.is_success() => {
                        return Reply::plain(message::bounded(id, json, max_response));
                    }
                    _ => response,
                }
            }
            MethodCallback::Subscription(callback) => match self.session.subscriptions().acquire() {
                Some(subscription_permit) => {
                    let state = SubscriptionState {
                        conn_id,
                        id_provider: &self.shared.id_provider,
                        subscription_permit,
                    };
                    let response = callback(id, params, self.sink.clone(), state, extensions).await;
                    // `accept`/`reject` already queued this very response.
                    let (json, _, _) = response.into_parts();
                    return Reply { json: Json::from(json), on_sent: None, already_sent: true };
                }
                None => MethodResponse::error(
                    id,
                    ErrorObject::owned(TOO_MANY_SUBSCRIPTIONS_CODE, TOO_MANY_SUBSCRIPTIONS_MSG, None::<()>),
                ),
            },
            MethodCallback::Unsubscription(callback) => {
                let mut response =
                    callback(id.clone(), params.clone(), conn_id, max_response, extensions.clone());
                // jsonrpsee registers a subscription just after it has queued the answer that
                // names it, so a cancel sent the moment that answer arrives can find nothing:
                // look again, briefly, before saying no stream was running.
                for _ in 0..UNSUBSCRIBE_RETRIES {
                    if !response.as_ref().contains("\"result\":false") {
                        break;
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                    response =
                        callback(id.clone(), params.clone(), conn_id, max_response, extensions.clone());
                }
                response
            }
        };
        Reply::from_response(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonrpsee::core::server::RpcModule;
    use jsonrpsee::types::ErrorObjectOwned;

    #[tokio::test]
    async fn a_panicking_handler_is_answered_as_an_internal_error_for_that_call_alone() {
        let mut module = RpcModule::new(());
        module
            .register_method("boom", |_, _, _| -> Result<(), ErrorObjectOwned> { panic!("handler bug") })
            .unwrap();
        module
            .register_async_method("boom/async", |_, _, _| async {
                if std::hint::black_box(true) {
                    panic!("async handler bug");
                }
                Ok::<(), ErrorObjectOwned>(())
            })
            .unwrap();
        module.register_method("fine", |_, _, _| Ok::<u32, ErrorObjectOwned>(7)).unwrap();
        let stats = Arc::new(Stats::new());
        let files = crate::context::Files::new(Default::default());
        let shared = Arc::new(Shared::new(
            module.into(),
            None,
            Config::default(),
            stats.clone(),
            WatchHub::start(&files),
            Ledgers::new(1 << 20, 1 << 20),
        ));
        let (tx, _rx) = mpsc::channel(4);
        let (sink_tx, _sink_rx) = mpsc::channel(4);
        let out = Outgoing::new(tx, shared.outgoing.open());
        let limits = OwnerLimits { max_owners: 4, max_observed: 16 };
        let owners = Owners::new("t".into(), limits, None, stats.clone());
        let session = Arc::new(Session::new("t".into(), out.clone(), 4, owners, stats));
        let inflight = Arc::new(Semaphore::new(4));
        let (socket, _peer) = UnixStream::pair().unwrap();
        let (_read, write) = socket.into_split();
        let conn = Conn {
            shared,
            session,
            conn_id: 1,
            sink: MethodSink::new(sink_tx),
            out,
            write_side: Arc::new(WriteSide::new(write)),
            inflight,
            cancels: Default::default(),
            gone: CancellationToken::new(),
        };
        let call = |method: &str| OwnedCall { id: Id::Number(1), method: method.to_owned(), params: None };
        for method in ["boom", "boom/async"] {
            let reply = conn.run(call(method)).await;
            let json: serde_json::Value = serde_json::from_slice(reply.json.as_bytes()).unwrap();
            assert_eq!(json["error"]["code"], INTERNAL_ERROR, "{json}");
            assert_eq!(json["id"], 1);
        }
        let reply = conn.run(call("fine")).await;
        assert_eq!(reply.json.as_str(), r#"{"jsonrpc":"2.0","id":1,"result":7}"#);
    }

    /// What a connection to `shared` answers to `input` after a session `initialize` with
    /// `root` (whose answer, with its random session id, is left out).
    async fn answers(shared: Arc<Shared>, root: &std::path::Path, input: &[u8]) -> Vec<Bytes> {
        let frame = |body: &[u8]| {
            let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
            out.extend_from_slice(body);
            out
        };
        let init = serde_json::json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"roots": [root]},
        });
        let mut bytes = frame(init.to_string().as_bytes());
        bytes.extend_from_slice(input);
        let (server, mut client) = UnixStream::pair().unwrap();
        let serve = tokio::spawn(serve(server, shared, 1, CancellationToken::new()));
        tokio::io::AsyncWriteExt::write_all(&mut client, &bytes).await.unwrap();
        tokio::io::AsyncWriteExt::shutdown(&mut client).await.unwrap();
        let mut output = Vec::new();
        client.read_to_end(&mut output).await.unwrap();
        serve.await.unwrap();
        let mut codec = LspCodec::new(1 << 24);
        let mut buf = BytesMut::from(output.as_slice());
        let mut frames = Vec::new();
        while let Some(Frame::Message(body)) = codec.decode_eof(&mut buf).unwrap() {
            frames.push(body);
        }
        assert!(frames.len() > 1, "no answer after initialize");
        frames.split_off(1)
    }

    #[tokio::test]
    async fn file_read_called_directly_answers_what_the_method_table_answers() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::write(root.join("a.txt"), "alpha\n\tbeta \"q\" \\ é\ngamma\n").unwrap();
        std::fs::write(root.join("bin.dat"), b"\x00\x01binary").unwrap();
        std::fs::create_dir(root.join("sub")).unwrap();
        let config = Config { max_frame_bytes: 300, ..Config::default() };
        let shared = |direct: bool| {
            let stats = Arc::new(Stats::new());
            let files = crate::context::Files::new(config.files.clone());
            let watch = WatchHub::start(&files);
            let policy = crate::session::SessionPolicy::default();
            let handlers =
                crate::rpc::methods(config.clone(), stats.clone(), files, watch.clone(), policy).unwrap();
            let direct = direct.then_some(handlers.direct);
            Arc::new(Shared::new(handlers.methods, direct, config.clone(), stats, watch, handlers.records))
        };
        let long = "x".repeat(400);
        std::fs::write(root.join("long.txt"), format!("{long}\n")).unwrap();
        let requests = [
            r#"{"jsonrpc":"2.0","id":1,"method":"file/read","params":{"path":"a.txt"}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":"s","method":"file/read","params":{"path":"a.txt","offset":2,"limit":1}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":"e\"s","method":"file/read","params":{"path":"a.txt","offset":3}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":-4,"method":"file/read","params":{"path":"a.txt","offset":9}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":5,"method":"file/read","params":{"path":"a.txt","offset":0}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":6,"method":"file/read","params":{"path":"missing.txt"}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":7,"method":"file/read","params":{"path":"../outside.txt"}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":8,"method":"file/read","params":{"path":"sub"}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":9,"method":"file/read","params":{"path":"bin.dat"}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":10,"method":"file/read"}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":11,"method":"file/read","params":["a.txt"]}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":12,"method":"file/read","params":{"path":7}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":13,"method":"file/read","params":{"path":"a.txt","owner":"bad name!"}}"#.to_owned(),
            // Over the frame limit: the same -32008.
            r#"{"jsonrpc":"2.0","id":14,"method":"file/read","params":{"path":"long.txt"}}"#.to_owned(),
            // A notification is run and not answered.
            r#"{"jsonrpc":"2.0","method":"file/read","params":{"path":"a.txt"}}"#.to_owned(),
            r#"[{"jsonrpc":"2.0","id":15,"method":"file/read","params":{"path":"a.txt","limit":1}},{"jsonrpc":"2.0","id":16,"method":"file/read","params":{"path":"nope"}}]"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":17,"method":"file/stat","params":{"path":"a.txt"}}"#.to_owned(),
        ];
        let mut input = Vec::new();
        for request in &requests {
            input.extend_from_slice(format!("Content-Length: {}\r\n\r\n{request}", request.len()).as_bytes());
        }
        let direct = answers(shared(true), &root, &input).await;
        let table = answers(shared(false), &root, &input).await;
        assert_eq!(direct.len(), requests.len() - 1, "every request answered, the notification not");
        // Calls may answer out of order: compare them as sets of exact bytes.
        let sorted = |mut frames: Vec<Bytes>| {
            frames.sort();
            frames
        };
        assert_eq!(sorted(direct.clone()), sorted(table));
        let text =
            direct.iter().map(|f| String::from_utf8_lossy(f).into_owned()).collect::<Vec<_>>().join("\n");
        for needle in ["\\tbeta \\\"q\\\" \\\\ é", "-32008", "FS_NOT_FOUND", "FS_OUTSIDE_ROOT", "FS_NOT_TEXT"]
        {
            assert!(text.contains(needle), "{needle} not in {text}");
        }
    }

    #[test]
    fn frame_headers_are_what_the_codec_writes() {
        for len in [0usize, 1, 9, 10, 99, 100, 1763, 65_536, 123_456_789, usize::MAX] {
            let (header, used) = frame_header(len);
            assert_eq!(&header[..used], format!("Content-Length: {len}\r\n\r\n").as_bytes());
        }
    }

    /// Reads frames off `peer` until `n` have arrived.
    async fn frames(peer: &mut UnixStream, n: usize) -> Vec<Bytes> {
        let mut codec = LspCodec::new(1 << 24);
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        while out.len() < n {
            match codec.decode(&mut buf).unwrap() {
                Some(Frame::Message(body)) => out.push(body),
                Some(Frame::Oversized { .. }) => panic!("oversized frame"),
                None => assert_ne!(peer.read_buf(&mut buf).await.unwrap(), 0, "socket closed early"),
            }
        }
        assert!(buf.is_empty(), "half a frame left over");
        out
    }

    #[tokio::test]
    async fn a_direct_write_taken_in_part_goes_out_first_whole_and_stays_in_the_budget() {
        let global = OutgoingBudget::new(1 << 24, 1 << 24, 4);
        let budget = global.open();
        let (socket, mut peer) = UnixStream::pair().unwrap();
        let (_read, write) = socket.into_split();
        let side = Arc::new(WriteSide::new(write));
        let (tx, rx) = mpsc::channel::<Json>(8);
        let out = Outgoing::new(tx, budget.clone());
        // Larger than any socket buffer: the socket takes only part of it, and nobody reads.
        let big = format!(r#"{{"id":1,"pad":"{}"}}"#, "x".repeat(4 << 20));
        assert!(side.try_direct(big.as_bytes(), &budget), "the socket took a first part");
        assert!(side.rest_pending());
        assert_eq!(global.queued(), big.len(), "the rest is still counted");
        // While the connection holds bytes, nothing is written directly: it queues behind.
        let small = r#"{"id":2}"#;
        assert!(!side.try_direct(small.as_bytes(), &budget));
        assert_eq!(global.queued(), big.len(), "a refused direct write holds nothing");
        assert!(out.send(Json::from(RawValue::from_string(small.to_owned()).unwrap())).await);
        let (stop, kill) = (CancellationToken::new(), CancellationToken::new());
        let writer = tokio::spawn(write_loop(side.clone(), rx, budget.clone(), stop.clone(), kill));
        let got = frames(&mut peer, 2).await;
        assert_eq!(got[0], big.as_bytes(), "the direct write arrives whole, first");
        assert_eq!(got[1], small.as_bytes());
        tokio::time::timeout(Duration::from_secs(5), budget.wait_empty()).await.unwrap();
        assert_eq!(global.queued(), 0, "every byte came back once written");
        // Idle again: the next answer goes straight out, and gives its bytes back at once.
        assert!(side.try_direct(br#"{"id":3}"#, &budget));
        assert_eq!(global.queued(), 0);
        assert_eq!(frames(&mut peer, 1).await[0], br#"{"id":3}"#.as_slice());
        drop(out);
        stop.cancel();
        writer.await.unwrap();
        drop(side);
        let mut rest = Vec::new();
        assert_eq!(peer.read_to_end(&mut rest).await.unwrap(), 0, "the writer closed the socket cleanly");
    }
}
