//! The connection's reading side: frames read off the socket within the daemon's budgets and
//! timeouts ([`FrameReader`]), and the `initialize` deadline.

use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use filectx_protocol::{CodecError, Frame, LspCodec};
use tokio::io::AsyncReadExt;
use tokio::net::unix::OwnedReadHalf;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;
use tokio_util::codec::Decoder;

use crate::config::Config;
use crate::session::{Phase, Session};
use crate::transport::incoming::PartialBudget;

/// Reads frames off the socket within the daemon's budgets and timeouts.
pub(super) struct FrameReader {
    pub(super) socket: OwnedReadHalf,
    pub(super) codec: LspCodec,
    /// Undecoded bytes: at most a header section, or the body of the frame being received
    /// (whose length a large frame reserved from `partial`).
    pub(super) buf: BytesMut,
    pub(super) partial: Arc<PartialBudget>,
    /// The reservation of the frame being received, if it is large.
    pub(super) reservation: Option<OwnedSemaphorePermit>,
    pub(super) frame_timeout: Duration,
    pub(super) eof: bool,
}

/// Why the reader could not produce a frame.
pub(super) enum ReadError {
    Codec(CodecError),
    Stalled { buffered: usize },
}

/// Room made in the read buffer before each read (the codec grows it further for bodies).
pub(super) const READ_CHUNK: usize = 8 * 1024;

impl FrameReader {
    pub(super) fn new(socket: OwnedReadHalf, config: &Config, partial: Arc<PartialBudget>) -> Self {
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
    pub(super) async fn next(&mut self) -> Option<Result<Frame, ReadError>> {
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
pub(super) async fn initialize_deadline(session: &Session, deadline: Instant) {
    if session.phase() == Phase::Uninitialized {
        tokio::time::sleep_until(deadline).await;
    } else {
        std::future::pending::<()>().await;
    }
}
