//! Batches: entries admitted in order, run concurrently within the connection's limit, and
//! answered as one array within the batch's byte budget.

use std::collections::VecDeque;
use std::sync::Arc;

use filectx_protocol::error::BATCH_TOO_BIG;
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use jsonrpsee::core::server::MethodResponseNotifyTx;
use jsonrpsee::types::{ErrorObject, Id};
use serde_json::value::RawValue;
use tokio::sync::OwnedSemaphorePermit;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use super::conn::{Conn, Reply};
use super::dispatch::{Admission, OwnedCall};
use crate::json::Json;
use crate::transport::message::{self};

/// One entry of a batch, in the order it came.
pub(super) enum BatchEntry {
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
pub(super) fn past_budget(slots: &[BatchEntry], budget: usize) -> usize {
    // The opening and closing brackets.
    let mut bytes = 2usize;
    for (pos, entry) in slots.iter().enumerate() {
        if let BatchEntry::Done(reply) = entry
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
pub(super) fn id_of(json: &Json) -> Id<'static> {
    #[derive(serde::Deserialize)]
    struct WithId<'a> {
        #[serde(borrow)]
        id: Id<'a>,
    }
    serde_json::from_slice::<WithId<'_>>(json.as_bytes()).map_or(Id::Null, |with| with.id.into_owned())
}

/// The answer of a batch entry past the batch's byte budget.
pub(super) fn batch_cut(id: Id<'static>, budget: usize, ran: bool) -> Json {
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

impl Conn {
    /// Handles a batch: calls are admitted in order (inline ones run during admission), the
    /// rest run concurrently within the connection's concurrency limit, and one array of
    /// responses goes back in the entries' order (none if all were notifications), within the
    /// batch's byte budget.
    pub(super) async fn handle_batch(
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
        let mut slots: Vec<BatchEntry> = Vec::with_capacity(entries.len());
        for raw in entries {
            match self.admit(message::parse_call(raw)) {
                Admission::Inline(call) => slots.push(BatchEntry::Done(self.run(call).await)),
                Admission::Spawn(call) => slots.push(BatchEntry::Run(call, true)),
                Admission::Notify(call) => slots.push(BatchEntry::Run(call, false)),
                Admission::Respond(json) => slots.push(BatchEntry::Done(Reply::plain(json))),
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
    pub(super) async fn run_batch(self: Arc<Self>, mut slots: Vec<BatchEntry>, permit: OwnedSemaphorePermit) {
        let config = &self.shared.config;
        let budget = config.max_batch_response_bytes.min(config.max_frame_bytes);
        let mut waiting: VecDeque<usize> = slots
            .iter()
            .enumerate()
            .filter(|(_, e)| matches!(e, BatchEntry::Run(..)))
            .map(|(i, _)| i)
            .collect();
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
                        Some(reply) if pos < cut => BatchEntry::Done(reply),
                        Some(reply) => {
                            if let Some(on_sent) = reply.on_sent {
                                on_sent.notify(false);
                            }
                            BatchEntry::Dropped(id_of(&reply.json))
                        }
                        None => BatchEntry::Silent,
                    };
                    cut = cut.min(past_budget(&slots, budget));
                    for entry in slots.iter_mut().skip(cut) {
                        if let BatchEntry::Done(reply) = entry {
                            let id = id_of(&reply.json);
                            *entry = BatchEntry::Dropped(id);
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
    pub(super) fn start(
        self: Arc<Self>,
        entry: &mut BatchEntry,
        pos: usize,
        permit: OwnedSemaphorePermit,
    ) -> impl std::future::Future<Output = (usize, Option<Reply>, OwnedSemaphorePermit)> + use<> {
        let taken = std::mem::replace(entry, BatchEntry::Running);
        async move {
            match taken {
                BatchEntry::Run(call, answer) => {
                    let reply = self.run(call).await;
                    (pos, answer.then_some(reply), permit)
                }
                _ => (pos, None, permit),
            }
        }
    }

    /// Sends a batch's responses in order; past the budget, -32010 for each remaining request.
    pub(super) async fn send_batch(&self, slots: Vec<BatchEntry>, budget: usize) {
        let mut array = vec![b'['];
        let mut answered = 0usize;
        let mut over = false;
        let mut sent_replies: Vec<Option<MethodResponseNotifyTx>> = Vec::new();
        for entry in slots {
            let (json, on_sent) = match entry {
                // Subscription answers went out on their own (jsonrpsee sends them at accept).
                BatchEntry::Done(reply) if reply.already_sent => continue,
                BatchEntry::Done(reply) => {
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
                BatchEntry::Dropped(id) => {
                    over = true;
                    (batch_cut(id, budget, true), None)
                }
                BatchEntry::Run(call, true) => {
                    over = true;
                    (batch_cut(call.id, budget, false), None)
                }
                BatchEntry::Run(_, false) | BatchEntry::Silent | BatchEntry::Running => continue,
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
}
