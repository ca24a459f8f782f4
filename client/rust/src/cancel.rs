//! Naming a request in `$/cancelRequest`: a jsonrpsee middleware layer that tells a caller which
//! JSON-RPC id its request went out with. jsonrpsee picks the ids itself and does not return
//! them, so [`crate::Client::request_cancellable`] runs its request inside a task-local slot
//! ([`tapped`]) that this layer fills when the request passes through it.

use std::future::Future;
use std::sync::{Arc, OnceLock};

use jsonrpsee::core::client::async_client::RpcService;
use jsonrpsee::core::middleware::{Batch, Notification, Request, RpcServiceT};
use jsonrpsee::types::Id;

/// Where the id of the first request made inside a [`tapped`] future is kept.
pub(crate) type IdSlot = Arc<OnceLock<Id<'static>>>;

tokio::task_local! {
    /// The slot of the [`tapped`] future being polled, if any.
    static CALL_ID: IdSlot;
}

/// The jsonrpsee service of every [`crate::Client`]: the async client's own, behind [`IdTap`].
pub(crate) type Service = IdTap<RpcService>;

/// A middleware that records the id of each request made inside a [`tapped`] future, then
/// passes everything on unchanged.
#[derive(Debug, Clone)]
pub(crate) struct IdTap<S> {
    inner: S,
}

impl<S> IdTap<S> {
    /// Wraps the service `inner`.
    pub(crate) fn new(inner: S) -> Self {
        Self { inner }
    }
}

impl<S: RpcServiceT + Send + Sync> RpcServiceT for IdTap<S> {
    type MethodResponse = S::MethodResponse;
    type NotificationResponse = S::NotificationResponse;
    type BatchResponse = S::BatchResponse;

    fn call<'a>(&self, request: Request<'a>) -> impl Future<Output = Self::MethodResponse> + Send + 'a {
        // Runs while the caller's request future is polled, so inside its task-local scope.
        let _ = CALL_ID.try_with(|slot| slot.set(request.id.clone().into_owned()));
        self.inner.call(request)
    }

    fn batch<'a>(&self, requests: Batch<'a>) -> impl Future<Output = Self::BatchResponse> + Send + 'a {
        self.inner.batch(requests)
    }

    fn notification<'a>(
        &self,
        notification: Notification<'a>,
    ) -> impl Future<Output = Self::NotificationResponse> + Send + 'a {
        self.inner.notification(notification)
    }
}

/// `call` (a request of a [`crate::Client`]) made to record its request's id: the slot is filled
/// once the returned future was first polled.
pub(crate) fn tapped<F: Future>(call: F) -> (IdSlot, impl Future<Output = F::Output>) {
    let slot = IdSlot::default();
    (Arc::clone(&slot), CALL_ID.scope(slot, call))
}
