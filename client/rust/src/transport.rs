//! The jsonrpsee transport over a Unix stream socket, framed with the LSP `Content-Length` codec.

use std::path::Path;

use filectx_protocol::{CodecError, Frame, LspCodec};
use futures::{SinkExt, StreamExt};
use jsonrpsee::core::client::{ReceivedMessage, TransportReceiverT, TransportSenderT};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio_util::codec::{FramedRead, FramedWrite};

use crate::{ClientError, trust};

/// Why the connection to the daemon can no longer carry messages.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// The daemon closed the connection (end of stream between two frames).
    #[error("the daemon closed the connection")]
    Closed,
    /// The daemon announced a frame larger than this client accepts; its body was skipped, but
    /// the answer it carried is lost.
    #[error("the daemon sent a frame of {length} bytes, over this client's limit of {limit} bytes")]
    Oversized {
        /// The frame's declared `Content-Length`.
        length: u64,
        /// The client's cap on one frame's body.
        limit: usize,
    },
    /// The byte stream from the daemon is not valid `Content-Length` framing, or the socket
    /// failed.
    #[error(transparent)]
    Codec(#[from] CodecError),
}

/// The sending half: each JSON-RPC message becomes one `Content-Length` frame.
#[derive(Debug)]
pub(crate) struct Sender {
    inner: FramedWrite<OwnedWriteHalf, LspCodec>,
}

/// The receiving half: each `Content-Length` frame from the daemon is one JSON-RPC message.
#[derive(Debug)]
pub(crate) struct Receiver {
    inner: FramedRead<OwnedReadHalf, LspCodec>,
}

/// Splits a connected stream into the jsonrpsee transport halves. Frames from the daemon larger
/// than `max_frame_bytes` are a transport error.
pub(crate) fn split(stream: UnixStream, max_frame_bytes: usize) -> (Sender, Receiver) {
    let (read, write) = stream.into_split();
    let sender = Sender { inner: FramedWrite::new(write, LspCodec::new(max_frame_bytes)) };
    let receiver = Receiver { inner: FramedRead::new(read, LspCodec::new(max_frame_bytes)) };
    (sender, receiver)
}

/// Connects to the daemon's socket at `path` and splits the stream into transport halves. This
/// is the only way the client connects: the socket's folder is checked first and the peer's
/// uid right after connecting ([`crate::trust`]), so nothing reaches a daemon of another user.
///
/// # Errors
/// [`ClientError::UntrustedSocket`] when the folder or the peer fails the check;
/// [`ClientError::Connect`] when connecting (or inspecting the folder) fails.
pub(crate) async fn connect(path: &Path, max_frame_bytes: usize) -> Result<(Sender, Receiver), ClientError> {
    Ok(split(connect_stream(path).await?, max_frame_bytes))
}

/// Connects to the daemon's socket at `path` after checking its folder, and checks the peer's
/// uid: the trusted stream under every connection ([`connect`], and [`crate::gate`]'s own
/// framed loop).
///
/// # Errors
/// As [`connect`].
pub(crate) async fn connect_stream(path: &Path) -> Result<UnixStream, ClientError> {
    let connect_error = |source| ClientError::Connect { path: path.to_owned(), source };
    let untrusted = |reason| ClientError::UntrustedSocket { socket: path.to_owned(), reason };
    trust::check_folder(path).await.map_err(connect_error)?.map_err(untrusted)?;
    let stream = UnixStream::connect(path).await.map_err(connect_error)?;
    // Dropping the stream on refusal closes it: the impostor sees a connection and nothing else.
    trust::check_peer(&stream).map_err(untrusted)?;
    Ok(stream)
}

/// jsonrpsee serializes a notification without params as `"params":null` (its requests leave
/// the member out). JSON-RPC 2.0 only allows an object or an array there, so the member is
/// dropped: `exit` goes on the wire as `{"jsonrpc":"2.0","method":"exit"}`.
///
/// jsonrpsee's messages are compact serde_json with `params` last, so a top-level `params: null`
/// is exactly the suffix `,"params":null}` of a single message (inside a nested value it would
/// be followed by another `}` or `]`, and a string member ends in `"`).
fn omit_null_params(mut msg: String) -> String {
    const NULL_PARAMS: &str = ",\"params\":null}";
    if msg.starts_with('{') && msg.ends_with(NULL_PARAMS) {
        msg.truncate(msg.len() - NULL_PARAMS.len());
        msg.push('}');
    }
    msg
}

impl TransportSenderT for Sender {
    type Error = TransportError;

    async fn send(&mut self, msg: String) -> Result<(), TransportError> {
        self.inner.send(omit_null_params(msg)).await.map_err(TransportError::from)
    }

    async fn close(&mut self) -> Result<(), TransportError> {
        // Flushes what is queued, then shuts the write half down so the daemon sees end of stream.
        SinkExt::<String>::close(&mut self.inner).await.map_err(TransportError::from)
    }
}

impl TransportReceiverT for Receiver {
    type Error = TransportError;

    async fn receive(&mut self) -> Result<ReceivedMessage, TransportError> {
        match self.inner.next().await {
            Some(Ok(Frame::Message(body))) => Ok(ReceivedMessage::Bytes(Vec::from(body))),
            Some(Ok(Frame::Oversized { length, limit })) => Err(TransportError::Oversized { length, limit }),
            Some(Err(error)) => Err(TransportError::Codec(error)),
            None => Err(TransportError::Closed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::omit_null_params;

    #[test]
    fn null_params_of_a_notification_are_left_out() {
        let exit = r#"{"jsonrpc":"2.0","method":"exit","params":null}"#;
        assert_eq!(omit_null_params(exit.to_owned()), r#"{"jsonrpc":"2.0","method":"exit"}"#);
        for unchanged in [
            r#"{"jsonrpc":"2.0","id":0,"method":"daemon/status"}"#,
            r#"{"jsonrpc":"2.0","method":"n","params":{"params":null}}"#,
            r#"{"jsonrpc":"2.0","method":"n","params":[null]}"#,
            r#"[{"jsonrpc":"2.0","method":"exit","params":null}]"#,
        ] {
            assert_eq!(omit_null_params(unchanged.to_owned()), unchanged);
        }
    }
}
