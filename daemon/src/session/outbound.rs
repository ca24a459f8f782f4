//! Requests the daemon sends to a client (server → client: `gate/writeIntent` to a gate), and
//! the routing of the client's responses back to them by id.
//!
//! Each session has one table. A request is entered before it is queued; the connection's
//! reader hands every response frame of a session that sends such requests ([`Outbound::active`])
//! to [`Outbound::answer`] before it waits for a permit or for room under its byte budgets, so
//! an answer is never held up by the client's own load. A response that matches nothing (late,
//! withdrawn, or never asked) is dropped and counted. When the connection ends, every pending
//! request fails at once ([`Outbound::close`]): the caller treats that as "no answer".

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use serde::Serialize;
use serde_json::value::RawValue;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::budget::Outgoing;
use crate::json::Json;

/// The most requests one session may have pending at once (a bound on the table whatever the
/// callers do; gates bound themselves much lower).
pub const MAX_PENDING: usize = 4096;

/// A client's response to one of our requests.
#[derive(Debug)]
pub enum Answer {
    /// `result`.
    Result(Box<RawValue>),
    /// `error`: its code and message.
    Error {
        /// JSON-RPC error code.
        code: i64,
        /// Its message.
        message: String,
    },
}

/// Why a request could not be sent or answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OutboundError {
    /// The connection is gone (or going).
    #[error("the client disconnected")]
    Closed,
    /// [`MAX_PENDING`] requests are pending already.
    #[error("too many requests to this client are pending")]
    Full,
}

/// One session's pending server → client requests.
#[derive(Debug)]
pub struct Outbound {
    out: Outgoing,
    pending: Mutex<HashMap<String, oneshot::Sender<Answer>>>,
    closed: CancellationToken,
    active: AtomicBool,
    activated: CancellationToken,
}

#[derive(Serialize)]
struct OutgoingRequest<'a, P> {
    jsonrpc: &'static str,
    id: &'a str,
    method: &'a str,
    params: P,
}

#[derive(Serialize)]
struct OutgoingNotification<'a, P> {
    jsonrpc: &'static str,
    method: &'a str,
    params: P,
}

/// A request sent and not answered yet; dropping it forgets the request (a late answer is
/// then dropped and counted).
#[derive(Debug)]
pub struct PendingRequest {
    outbound: Arc<Outbound>,
    id: String,
    answer: oneshot::Receiver<Answer>,
}

impl PendingRequest {
    /// The client's answer; `Closed` when the connection ended first.
    pub async fn answer(&mut self) -> Result<Answer, OutboundError> {
        (&mut self.answer).await.map_err(|_| OutboundError::Closed)
    }
}

impl Drop for PendingRequest {
    fn drop(&mut self) {
        self.outbound.lock().remove(&self.id);
    }
}

impl Outbound {
    /// An empty table for the connection writing to `out`.
    pub(crate) fn new(out: Outgoing) -> Arc<Self> {
        Arc::new(Self {
            out,
            pending: Mutex::default(),
            closed: CancellationToken::new(),
            active: AtomicBool::new(false),
            activated: CancellationToken::new(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, oneshot::Sender<Answer>>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// From now on the connection's reader routes responses before anything else.
    pub fn activate(&self) {
        self.active.store(true, Ordering::Release);
        self.activated.cancel();
    }

    /// Whether responses are routed (see [`Outbound::activate`]).
    pub fn active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    /// Resolves once the table is active.
    pub async fn activated(&self) {
        self.activated.cancelled().await;
    }

    /// Resolves once the connection has ended.
    pub async fn closed(&self) {
        self.closed.cancelled().await;
    }

    /// Whether the connection has ended.
    pub fn is_closed(&self) -> bool {
        self.closed.is_cancelled()
    }

    /// Sends request `method` with `params` under `id` (a string no client request uses:
    /// ours are never compared with the client's ids), waiting for room in the connection's
    /// queue.
    pub async fn request<P: Serialize>(
        self: &Arc<Self>,
        id: &str,
        method: &str,
        params: P,
    ) -> Result<PendingRequest, OutboundError> {
        let json = serde_json::value::to_raw_value(&OutgoingRequest { jsonrpc: "2.0", id, method, params })
            .map(Json::from)
            .map_err(|_| OutboundError::Closed)?;
        let (tx, answer) = oneshot::channel();
        {
            let mut pending = self.lock();
            if self.is_closed() {
                return Err(OutboundError::Closed);
            }
            if pending.len() >= MAX_PENDING {
                return Err(OutboundError::Full);
            }
            pending.insert(id.to_owned(), tx);
        }
        let pending = PendingRequest { outbound: self.clone(), id: id.to_owned(), answer };
        if !self.out.send(json).await {
            return Err(OutboundError::Closed);
        }
        Ok(pending)
    }

    /// Sends a notification if there is room now (best effort: `$/cancelRequest` for a
    /// withdrawn request).
    pub fn notify<P: Serialize>(&self, method: &str, params: P) {
        if let Ok(json) =
            serde_json::value::to_raw_value(&OutgoingNotification { jsonrpc: "2.0", method, params })
        {
            let _ = self.out.try_send(Json::from(json));
        }
    }

    /// Hands the client's response to the request it answers; `false` when none is pending
    /// under `id` (the caller drops and counts it).
    pub fn answer(&self, id: &str, answer: Answer) -> bool {
        match self.lock().remove(id) {
            Some(tx) => tx.send(answer).is_ok(),
            None => false,
        }
    }

    /// The connection ended: every pending request fails now, and no new one is sent.
    pub fn close(&self) {
        let pending = {
            let mut pending = self.lock();
            self.closed.cancel();
            std::mem::take(&mut *pending)
        };
        drop(pending);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::budget::OutgoingBudget;

    fn outbound() -> (Arc<Outbound>, tokio::sync::mpsc::Receiver<Json>) {
        let (tx, rx) = tokio::sync::mpsc::channel(8);
        let budget = OutgoingBudget::new(1 << 20, 1 << 20, 4).open();
        (Outbound::new(Outgoing::new(tx, budget)), rx)
    }

    #[tokio::test]
    async fn answers_reach_their_request_once_and_the_end_fails_the_rest() {
        let (table, mut sent) = outbound();
        let mut first = table.request("a-1", "m", serde_json::json!({"n": 1})).await.unwrap();
        let mut second = table.request("a-2", "m", serde_json::json!({"n": 2})).await.unwrap();
        let frame = sent.recv().await.unwrap();
        assert_eq!(frame.as_str(), r#"{"jsonrpc":"2.0","id":"a-1","method":"m","params":{"n":1}}"#);
        let result = serde_json::value::to_raw_value(&true).unwrap();
        assert!(table.answer("a-1", Answer::Result(result)));
        assert!(matches!(first.answer().await, Ok(Answer::Result(raw)) if raw.get() == "true"));
        assert!(!table.answer("a-1", Answer::Error { code: 1, message: String::new() }), "answered once");
        assert!(!table.answer("nope", Answer::Error { code: 1, message: String::new() }));
        drop(first);
        table.close();
        assert_eq!(second.answer().await.unwrap_err(), OutboundError::Closed);
        assert_eq!(table.request("a-3", "m", ()).await.unwrap_err(), OutboundError::Closed);
        drop(second);
        assert!(table.lock().is_empty(), "nothing is left behind");
    }

    #[tokio::test]
    async fn a_request_dropped_unanswered_is_forgotten() {
        let (table, _sent) = outbound();
        let pending = table.request("b-1", "m", ()).await.unwrap();
        drop(pending);
        assert!(table.lock().is_empty());
        let late = serde_json::value::to_raw_value(&1).unwrap();
        assert!(!table.answer("b-1", Answer::Result(late)), "a late answer matches nothing");
    }
}
