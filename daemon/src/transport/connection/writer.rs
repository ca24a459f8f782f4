//! The connection's writing side: the socket's write half shared by the writer task and direct
//! writes ([`WriteSide`]), how a message is framed, the writer task ([`write_loop`]) and the
//! forwarding of subscription messages into the budgeted queue ([`forward`]).

use std::sync::Arc;

use bytes::BytesMut;
use serde_json::value::RawValue;
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::json::Json;
use crate::session::budget::{ConnBudget, Outgoing};

/// The most bytes the writer gathers from the queue before one write.
pub(super) const WRITE_BATCH_BYTES: usize = 64 * 1024;

/// Frames one outgoing message into `buf` (the one place a message becomes wire bytes, for the
/// queue's writer; a direct write frames the same way through [`frame_header`]).
pub(super) fn frame_into(body: &[u8], buf: &mut BytesMut) {
    let (header, len) = frame_header(body.len());
    buf.reserve(len + body.len());
    buf.extend_from_slice(&header[..len]);
    buf.extend_from_slice(body);
}

/// Room for `Content-Length: <20 digits>\r\n\r\n`.
pub(super) const HEADER_ROOM: usize = 48;

/// The frame header of a body of `len` bytes (as [`LspCodec`](filectx_protocol::LspCodec) writes it), and its length.
pub(super) fn frame_header(len: usize) -> ([u8; HEADER_ROOM], usize) {
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
pub(super) struct WriteSide {
    pub(super) socket: OwnedWriteHalf,
    /// Held around every write to the socket; the rest of a direct write taken only in part.
    pub(super) turn: std::sync::Mutex<Option<Leftover>>,
    /// Wakes the writer when a rest is waiting in `turn`.
    pub(super) rest_waiting: tokio::sync::Notify,
}

/// The unwritten rest of a direct write, and the bytes its message holds in the budget.
pub(super) struct Leftover {
    pub(super) bytes: Vec<u8>,
    pub(super) reserved: usize,
}

impl WriteSide {
    pub(super) fn new(socket: OwnedWriteHalf) -> Self {
        Self { socket, turn: std::sync::Mutex::new(None), rest_waiting: tokio::sync::Notify::new() }
    }

    pub(super) fn turn(&self) -> std::sync::MutexGuard<'_, Option<Leftover>> {
        // The slot is replaced whole; a panic elsewhere cannot leave it half-written.
        self.turn.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Writes the message `body` as one frame straight to the socket, without waiting, if
    /// the connection holds no outgoing bytes and the socket takes at least part of it now (the
    /// rest goes to the writer). `false`: nothing was written or reserved; queue it instead.
    pub(super) fn try_direct(&self, body: &[u8], budget: &ConnBudget) -> bool {
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
    pub(super) fn peer_gone(&self) -> bool {
        use rustix::event::{PollFd, PollFlags, Timespec};
        let mut fds = [PollFd::new(self.socket.as_ref(), PollFlags::empty())];
        let now = Timespec { tv_sec: 0, tv_nsec: 0 };
        matches!(rustix::event::poll(&mut fds, Some(&now)), Ok(ready) if ready > 0)
            && fds[0].revents().intersects(PollFlags::HUP | PollFlags::ERR)
    }

    /// Whether the rest of a direct write waits for the writer.
    pub(super) fn rest_pending(&self) -> bool {
        self.turn().is_some()
    }

    /// Writes all of `bytes`, one non-blocking write at a time, each under `turn`.
    pub(super) async fn write_all(&self, mut bytes: &[u8]) -> std::io::Result<()> {
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

/// Moves what jsonrpsee's subscription sink queues into the connection's queue, paying for
/// each message with what its stream prepaid and reserving the rest.
pub(super) async fn forward(mut sink: mpsc::Receiver<Box<RawValue>>, out: Outgoing) {
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

/// Writes queued messages as frames, gathering whatever is ready into one write, and gives
/// their bytes back to the budget once they are written. The rest of a direct write (see
/// [`WriteSide`]) goes first. `kill` drops the queue at once.
pub(super) async fn write_loop(
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
