//! [`TextStream`]: the chunks of one `fs/streamText` subscription, checked for order and for
//! coming from one version, with every way the stream can end turned into a final item.

use std::pin::Pin;
use std::sync::Weak;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use filectx_protocol::TextChunk;
use futures::stream::FusedStream;
use futures::{FutureExt as _, Stream};
use jsonrpsee::core::client::{Subscription, SubscriptionCloseReason};

use crate::ClientError;

/// The chunks of a file streamed by `fs/streamText`, in order; see [`crate::Client::stream_text`].
///
/// Each item is one `fs/textChunk`: consecutive lines, all of one version. The stream yields
/// `Ok` chunks up to and including the one whose `done` is true, and then ends. Any other ending
/// is a final `Err` item, after which the stream ends too:
///
/// - an error item from the daemon (the file changed mid-stream: `FS_STALE_VERSION`) is
///   [`ClientError::StreamFailed`], whose [`ClientError::fs_code`] is the item's code;
/// - reading more slowly than the chunks arrive, so that more than the connection's
///   notification buffer went unread, is [`ClientError::StreamLagged`];
/// - the connection breaking (or the [`crate::Client`] being dropped) is
///   [`ClientError::Transport`];
/// - a chunk that does not decode is [`ClientError::Decode`], and chunks out of order, of
///   another version, or the daemon ending the subscription without a last chunk are
///   [`ClientError::Protocol`].
///
/// A stream that ends without `Err` therefore delivered every line from the requested offset to
/// the end of the file.
///
/// Dropping the stream before its end, or [`TextStream::cancel`], sends `fs/streamCancel`, which
/// stops the daemon's producer. The subscription is released as soon as the stream ends, so a
/// finished stream holds no buffer; jsonrpsee's client cannot forget a subscription without
/// unsubscribing, so `fs/streamCancel` also goes out for a stream that ended normally, and the
/// daemon answers it with `false`.
#[derive(Debug)]
pub struct TextStream {
    /// The subscription while chunks may still come; `None` once the stream has ended.
    subscription: Option<Subscription<TextChunk>>,
    /// The connection, to tell a broken one from a subscription the daemon ended. Weak, so that
    /// a stream does not keep the connection open after its client is dropped.
    connection: Weak<jsonrpsee::core::client::Client<crate::cancel::Service>>,
    /// The client's request timeout (only to map jsonrpsee's errors).
    request_timeout: Duration,
    /// The client's per-subscription buffer, in chunks (reported by `StreamLagged`).
    buffer: usize,
    /// The line the next chunk must start at: the first line not delivered yet.
    next_line: u64,
    /// The version of the chunks delivered so far.
    version: Option<String>,
}

impl TextStream {
    /// Wraps a started subscription whose first chunk must start at `first_line`.
    pub(crate) fn new(
        subscription: Subscription<TextChunk>,
        connection: Weak<jsonrpsee::core::client::Client<crate::cancel::Service>>,
        request_timeout: Duration,
        buffer: usize,
        first_line: u64,
    ) -> Self {
        Self {
            subscription: Some(subscription),
            connection,
            request_timeout,
            buffer,
            next_line: first_line,
            version: None,
        }
    }

    /// Stops the stream: sends `fs/streamCancel` (unless the stream already ended) and waits
    /// until the client has stopped delivering its chunks; chunks still in flight are discarded.
    /// It does not wait for the daemon's answer, but any request sent on this client afterwards
    /// goes on the wire after the cancel. Dropping the stream cancels it too, without waiting.
    pub async fn cancel(mut self) {
        if let Some(subscription) = self.subscription.take() {
            // jsonrpsee only reports success: a connection that is already gone has ended the
            // subscription anyway.
            let _ = subscription.unsubscribe().await;
        }
    }

    /// Checks that `chunk` continues the stream, and turns an error item into its error.
    fn accept(&mut self, chunk: TextChunk) -> Result<TextChunk, ClientError> {
        if let Some(error) = chunk.error {
            return Err(ClientError::StreamFailed {
                code: error.code,
                message: error.message,
                version: self.version.clone().unwrap_or(chunk.version),
                next_line: self.next_line,
            });
        }
        if let Some(version) = &self.version
            && *version != chunk.version
        {
            return Err(ClientError::Protocol(format!(
                "the stream switched from version {version} to {} without an error item",
                chunk.version
            )));
        }
        if chunk.start_line != self.next_line {
            return Err(ClientError::Protocol(format!(
                "the stream's chunk starts at line {} where line {} was due",
                chunk.start_line, self.next_line
            )));
        }
        self.next_line = self.next_line.saturating_add(chunk.lines.len() as u64);
        if self.version.is_none() {
            self.version = Some(chunk.version.clone());
        }
        Ok(chunk)
    }

    /// Why the subscription ended before the chunk with `done`.
    fn ended_early(&self) -> ClientError {
        let lagged = self.subscription.as_ref().and_then(Subscription::close_reason);
        if matches!(lagged, Some(SubscriptionCloseReason::Lagged)) {
            return ClientError::StreamLagged { buffer: self.buffer };
        }
        let Some(connection) = self.connection.upgrade() else {
            return ClientError::Transport("the client was dropped before the stream ended".to_owned());
        };
        if connection.is_connected() {
            // jsonrpsee closes a subscription while connected only on the daemon's subscription
            // error message (or on lag, handled above).
            return ClientError::Protocol("the daemon ended the stream before its last chunk".to_owned());
        }
        // jsonrpsee records why the connection broke before it ends the subscriptions, so this
        // is ready at once.
        match connection.on_disconnect().now_or_never() {
            Some(error) => ClientError::from_rpc(error, self.request_timeout),
            None => ClientError::Transport("the connection closed before the stream ended".to_owned()),
        }
    }
}

impl Stream for TextStream {
    type Item = Result<TextChunk, ClientError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let Some(subscription) = this.subscription.as_mut() else {
            return Poll::Ready(None);
        };
        let item = match ready!(Pin::new(subscription).poll_next(cx)) {
            Some(Ok(chunk)) => this.accept(chunk),
            Some(Err(error)) => Err(ClientError::Decode(error)),
            None => Err(this.ended_early()),
        };
        if !matches!(&item, Ok(chunk) if !chunk.done) {
            // The stream is over: releasing the subscription frees its buffer and, if the daemon
            // still produces (a chunk that did not decode or was out of order), cancels it.
            this.subscription = None;
        }
        Poll::Ready(Some(item))
    }
}

impl FusedStream for TextStream {
    fn is_terminated(&self) -> bool {
        self.subscription.is_none()
    }
}
