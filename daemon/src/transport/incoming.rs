//! The transport's budget of incoming bytes: frames that have only partly arrived.
//!
//! A frame whose body is larger than [`UNCOUNTED_FRAME_BYTES`] reserves its declared length from
//! the daemon-wide [`PartialBudget`] before its body is read, and gives it back when the frame
//! is complete (or the connection ends). While the budget is taken, the connection is simply
//! not read: its bytes stay in the kernel, not in the daemon.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Frames with bodies up to this many bytes are read without a reservation: every connection may
/// always have one such frame arriving, so ordinary requests never wait on someone's big upload.
pub(crate) const UNCOUNTED_FRAME_BYTES: usize = 64 * 1024;

/// The daemon-wide budget for bytes of frames that have only partly arrived.
#[derive(Debug)]
pub(crate) struct PartialBudget {
    permits: Arc<Semaphore>,
    limit: u32,
}

impl PartialBudget {
    /// A budget of `limit` bytes (capped at 4 GiB, the semaphore's unit).
    pub(crate) fn new(limit: usize) -> Arc<Self> {
        let limit = u32::try_from(limit).unwrap_or(u32::MAX).max(1);
        Arc::new(Self { permits: Arc::new(Semaphore::new(limit as usize)), limit })
    }

    /// Whether a body of `length` bytes needs a reservation before it is read.
    pub(crate) fn counts(length: usize) -> bool {
        length > UNCOUNTED_FRAME_BYTES
    }

    /// Reserves room for a body of `length` bytes, waiting in line for it. A body larger than
    /// the whole budget takes all of it, so it is read alone. `None` only if the budget were
    /// closed, which it never is.
    pub(crate) async fn reserve(&self, length: usize) -> Option<OwnedSemaphorePermit> {
        let n = u32::try_from(length).unwrap_or(u32::MAX).min(self.limit);
        if self.permits.available_permits() < n as usize {
            tracing::debug!(
                length,
                in_use = self.in_use(),
                limit = self.limit,
                "large frame waits, unread, for the budget of partly received bytes"
            );
        }
        self.permits.clone().acquire_many_owned(n).await.ok()
    }

    /// Bytes reserved right now.
    fn in_use(&self) -> usize {
        (self.limit as usize).saturating_sub(self.permits.available_permits())
    }
}
