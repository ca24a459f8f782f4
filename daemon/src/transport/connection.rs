//! One connection's driver: read frames, admit calls in order, serve requests concurrently,
//! write every outgoing message through one bounded queue.
//!
//! Ordering and gating happen in the reader, one frame at a time: `initialize` and `shutdown`
//! run inline (so a request pipelined right behind `initialize` already sees the session
//! ready), everything else is spawned and may answer out of order, as JSON-RPC allows.
//!
//! Backpressure, so that no client can make the daemon buffer without bound: at most
//! `max_concurrent_requests` calls of one connection are in flight (the reader waits for a
//! permit before reading the next frame), and at most `max_queued_messages` outgoing messages
//! are queued (a response waits for room; a notification is dropped). A client that never reads
//! therefore stalls only itself, and the kernel's socket buffer throttles its writes.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use filectx_protocol::error::{BATCH_TOO_BIG, INTERNAL_ERROR, PARSE_ERROR, REQUEST_TOO_BIG};
use filectx_protocol::methods::{EXIT, INITIALIZE, SHUTDOWN};
use filectx_protocol::{CodecError, Frame, LspCodec};
use futures::{FutureExt, StreamExt};
use jsonrpsee::Extensions;
use jsonrpsee::core::id_providers::RandomIntegerIdProvider;
use jsonrpsee::core::server::{
    ConnectionId, MethodCallback, MethodResponse, MethodResponseNotifyTx, MethodSink, Methods,
    SubscriptionState,
};
use jsonrpsee::types::error::{ErrorCode, TOO_MANY_SUBSCRIPTIONS_CODE, TOO_MANY_SUBSCRIPTIONS_MSG};
use jsonrpsee::types::{ErrorObject, Id, Params};
use serde_json::value::RawValue;
use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_util::codec::{Encoder, FramedRead};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use super::message::{self, Call, Incoming};
use crate::config::Config;
use crate::context::Observations;
use crate::session::{Phase, Session};
use crate::stats::Stats;
use crate::watch::WatchHub;

/// What every connection shares: the method table, configuration and counters.
#[derive(Debug)]
pub(crate) struct Shared {
    pub methods: Methods,
    pub config: Config,
    pub stats: Arc<Stats>,
    pub id_provider: RandomIntegerIdProvider,
    pub watch: Arc<WatchHub>,
}

/// The most bytes the writer gathers from the queue before one write.
const WRITE_BATCH_BYTES: usize = 64 * 1024;

/// One connection's state while it is served.
struct Conn {
    shared: Arc<Shared>,
    session: Arc<Session>,
    conn_id: usize,
    /// Responses go here; `send` waits for room, which is what stalls a non-reading client.
    out: mpsc::Sender<Box<RawValue>>,
    /// The same queue, as jsonrpsee subscriptions need it.
    sink: MethodSink,
}

/// A response ready to be queued, and the subscription machinery's wish to hear when it was.
struct Reply {
    json: Box<RawValue>,
    on_sent: Option<MethodResponseNotifyTx>,
    /// jsonrpsee's subscription `accept`/`reject` already queued this response themselves.
    already_sent: bool,
}

impl Reply {
    fn plain(json: Box<RawValue>) -> Self {
        Self { json, on_sent: None, already_sent: false }
    }

    fn from_response(response: MethodResponse) -> Self {
        let (json, on_sent, _) = response.into_parts();
        Self { json, on_sent, already_sent: false }
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
    Respond(Box<RawValue>),
    /// The client asked to close the connection.
    Exit,
    /// Nothing to do (an unknown or premature notification).
    Ignore,
}

/// Why the reader stopped.
#[derive(Debug)]
enum End {
    Eof,
    Exit,
    DaemonShutdown,
    Codec(CodecError),
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
    let (read_half, write_half) = stream.into_split();
    let (out_tx, out_rx) = mpsc::channel::<Box<RawValue>>(config.max_queued_messages.max(1));
    let writer_stop = CancellationToken::new();
    let writer = tokio::spawn(write_loop(write_half, out_rx, writer_stop.clone()).in_current_span());

    let observations = Observations::with_sink(config.max_observed_files, shared.watch.sink(&session_id));
    let session = Arc::new(Session::new(
        session_id.clone(),
        out_tx.clone(),
        config.max_subscriptions,
        observations,
        shared.stats.clone(),
    ));
    shared.watch.register(&session_id, Arc::downgrade(&session));
    let max_response = u32::try_from(config.max_frame_bytes).unwrap_or(u32::MAX);
    let conn = Arc::new(Conn {
        shared,
        session,
        conn_id,
        sink: MethodSink::new_with_limit(out_tx.clone(), max_response),
        out: out_tx,
    });
    tracing::debug!("connection opened");

    let inflight = Arc::new(Semaphore::new(config.max_concurrent_requests.max(1)));
    let tasks = TaskTracker::new();
    let mut frames = FramedRead::new(read_half, LspCodec::new(config.max_frame_bytes));
    let end = loop {
        let permit = tokio::select! {
            biased;
            () = shutdown.cancelled() => break End::DaemonShutdown,
            permit = inflight.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                // The semaphore is never closed; treat it like a daemon shutdown if it were.
                Err(_) => break End::DaemonShutdown,
            },
        };
        let frame = tokio::select! {
            biased;
            () = shutdown.cancelled() => break End::DaemonShutdown,
            frame = frames.next() => frame,
        };
        match frame {
            None => break End::Eof,
            Some(Err(err)) => break End::Codec(err),
            Some(Ok(Frame::Oversized { length, limit })) => {
                tracing::warn!(length, limit, "request frame over the size limit skipped");
                let error = ErrorObject::owned(
                    REQUEST_TOO_BIG,
                    format!("Request is too big: {length} bytes exceeds the frame limit of {limit} bytes"),
                    Some(serde_json::json!({"length": length, "limit": limit})),
                );
                conn.send(message::error_response(Id::Null, error)).await;
            }
            Some(Ok(Frame::Message(body))) => {
                if conn.handle_frame(body, permit, &tasks).await {
                    break End::Exit;
                }
            }
        }
    };

    match &end {
        End::Eof | End::Exit | End::DaemonShutdown => {
            tracing::debug!(reason = ?end, "connection reader stopped")
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
    // Let in-flight requests finish and their responses be queued; the daemon bounds this wait
    // on shutdown. Then the writer drains the queue and closes.
    tasks.close();
    tasks.wait().await;
    writer_stop.cancel();
    drop(conn);
    if let Err(err) = writer.await {
        tracing::error!(%err, "connection writer failed");
    }
    tracing::debug!("connection closed");
}

/// Writes queued messages as frames, gathering whatever is ready into one write.
async fn write_loop(
    mut socket: OwnedWriteHalf,
    mut queue: mpsc::Receiver<Box<RawValue>>,
    stop: CancellationToken,
) {
    let mut codec = LspCodec::default();
    let mut buf = BytesMut::with_capacity(8 * 1024);
    loop {
        let first = tokio::select! {
            message = queue.recv() => match message {
                Some(message) => message,
                None => break,
            },
            () = stop.cancelled() => match queue.try_recv() {
                Ok(message) => message,
                Err(_) => break,
            },
        };
        let mut next = Some(first);
        while let Some(message) = next.take() {
            // Encoding into memory cannot fail.
            let _ = codec.encode(message.get(), &mut buf);
            if buf.len() < WRITE_BATCH_BYTES {
                next = queue.try_recv().ok();
            }
        }
        if let Err(err) = socket.write_all(&buf).await {
            tracing::debug!(%err, "client stopped reading; dropping its outgoing queue");
            break;
        }
        buf.clear();
        if buf.capacity() > 4 * WRITE_BATCH_BYTES {
            // One huge response must not pin its buffer for the connection's lifetime.
            buf = BytesMut::with_capacity(8 * 1024);
        }
    }
    let _ = socket.shutdown().await;
}

impl Conn {
    /// Queues one message, waiting for room. A closed queue means the client is gone.
    async fn send(&self, json: Box<RawValue>) -> bool {
        self.out.send(json).await.is_ok()
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
                    tasks.spawn(
                        async move {
                            let reply = conn.run(call).await;
                            conn.send_reply(reply).await;
                            drop(permit);
                        }
                        .in_current_span(),
                    );
                }
                Admission::Notify(call) => {
                    let conn = self.clone();
                    tasks.spawn(
                        async move {
                            let _ = conn.run(call).await;
                            drop(permit);
                        }
                        .in_current_span(),
                    );
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
    /// rest run concurrently, and one array of responses goes back (none if all were
    /// notifications).
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
        let mut ready: Vec<Reply> = Vec::new();
        let mut calls: Vec<(OwnedCall, bool)> = Vec::new();
        for raw in entries {
            match self.admit(message::parse_call(raw)) {
                Admission::Inline(call) => ready.push(self.run(call).await),
                Admission::Spawn(call) => calls.push((call, true)),
                Admission::Notify(call) => calls.push((call, false)),
                Admission::Respond(json) => ready.push(Reply::plain(json)),
                Admission::Exit => exit = true,
                Admission::Ignore => {}
            }
        }
        let conn = self.clone();
        tasks.spawn(
            async move {
                let runs = calls.into_iter().map(|(call, answer)| {
                    let conn = conn.clone();
                    async move {
                        let reply = conn.run(call).await;
                        answer.then_some(reply)
                    }
                });
                ready.extend(futures::future::join_all(runs).await.into_iter().flatten());
                // Subscription answers went out on their own (jsonrpsee sends them at accept).
                ready.retain(|reply| !reply.already_sent);
                if !ready.is_empty() {
                    let mut array = String::from("[");
                    for (i, reply) in ready.iter().enumerate() {
                        if i > 0 {
                            array.push(',');
                        }
                        array.push_str(reply.json.get());
                    }
                    array.push(']');
                    let sent = match RawValue::from_string(array) {
                        Ok(json) => conn.send(json).await,
                        Err(err) => {
                            tracing::error!(%err, "batch response is not valid JSON");
                            false
                        }
                    };
                    for reply in ready {
                        if let Some(on_sent) = reply.on_sent {
                            on_sent.notify(sent);
                        }
                    }
                }
                drop(permit);
            }
            .in_current_span(),
        );
        exit
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
        let max_response = self.shared.config.max_frame_bytes;
        let conn_id = ConnectionId(self.conn_id);
        let response = match callback {
            MethodCallback::Sync(callback) => callback(id, params, max_response, extensions),
            MethodCallback::Async(callback) => callback(id, params, conn_id, max_response, extensions).await,
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
                    return Reply { json, on_sent: None, already_sent: true };
                }
                None => MethodResponse::error(
                    id,
                    ErrorObject::owned(TOO_MANY_SUBSCRIPTIONS_CODE, TOO_MANY_SUBSCRIPTIONS_MSG, None::<()>),
                ),
            },
            MethodCallback::Unsubscription(callback) => {
                callback(id, params, conn_id, max_response, extensions)
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
        let provider = Arc::new(crate::provider::Provider::new(Default::default()));
        let shared = Arc::new(Shared {
            methods: module.into(),
            config: Config::default(),
            stats: stats.clone(),
            id_provider: RandomIntegerIdProvider,
            watch: WatchHub::start(provider),
        });
        let (tx, _rx) = mpsc::channel(4);
        let session = Arc::new(Session::new("t".into(), tx.clone(), 4, Observations::new(16), stats));
        let conn = Conn { shared, session, conn_id: 1, sink: MethodSink::new(tx.clone()), out: tx };
        let call = |method: &str| OwnedCall { id: Id::Number(1), method: method.to_owned(), params: None };
        for method in ["boom", "boom/async"] {
            let reply = conn.run(call(method)).await;
            let json: serde_json::Value = serde_json::from_str(reply.json.get()).unwrap();
            assert_eq!(json["error"]["code"], INTERNAL_ERROR, "{json}");
            assert_eq!(json["id"], 1);
        }
        let reply = conn.run(call("fine")).await;
        assert_eq!(reply.json.get(), r#"{"jsonrpc":"2.0","id":1,"result":7}"#);
    }
}
