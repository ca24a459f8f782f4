//! How the reader admits each call in order ([`Conn::admit`]), `$/cancelRequest`, and the
//! dispatch of one call to the method table ([`Conn::run`]).

use std::panic::AssertUnwindSafe;

use filectx_protocol::error::INTERNAL_ERROR;
use filectx_protocol::methods::{CANCEL_REQUEST, EXIT, INITIALIZE, SHUTDOWN};
use futures::FutureExt;
use jsonrpsee::Extensions;
use jsonrpsee::core::server::{ConnectionId, MethodCallback, MethodResponse, SubscriptionState};
use jsonrpsee::types::error::{ErrorCode, TOO_MANY_SUBSCRIPTIONS_CODE, TOO_MANY_SUBSCRIPTIONS_MSG};
use jsonrpsee::types::{ErrorObject, Id, Params};
use serde_json::value::RawValue;

use super::conn::{Conn, Reply};
use crate::json::Json;
use crate::session::Phase;
use crate::stats::Stats;
use crate::transport::message::{self, Call};

/// Removes a request's cancellation from its connection when the request is done.
pub(super) struct CancelEntry<'a> {
    pub(super) conn: &'a Conn,
    pub(super) id: Id<'static>,
}

impl Drop for CancelEntry<'_> {
    fn drop(&mut self) {
        self.conn.cancels_lock().remove(&self.id);
    }
}

/// An owned request, detached from the frame it came in, so it can move into a task.
pub(super) struct OwnedCall {
    pub(super) id: Id<'static>,
    pub(super) method: String,
    pub(super) params: Option<Box<RawValue>>,
}

/// What the reader decided to do with one call.
pub(super) enum Admission {
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

/// More looks (1 ms apart) for the subscription a cancel names, when the first found none: it
/// may be registered a moment after its id was sent (see `dispatch`).
pub(super) const UNSUBSCRIBE_RETRIES: usize = 3;

impl Conn {
    /// Decides, in the reader and in order, what to do with one call.
    pub(super) fn admit(&self, call: Call<'_>) -> Admission {
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

    /// `$/cancelRequest` `{id}`: trips the cancellation of that request if it is in flight
    /// (unknown ids and malformed params are ignored, as LSP asks of a notification).
    pub(super) fn cancel(&self, params: Option<&RawValue>) {
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
    pub(super) async fn run(&self, call: OwnedCall) -> Reply {
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

    pub(super) async fn dispatch(&self, call: OwnedCall) -> Reply {
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
            let prepared = crate::rpc::PreparedResponse::new(id.clone());
            extensions.insert(prepared.clone());
            prepared
        };
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
