//! The outgoing sink's byte budgets: what one connection and the whole daemon may hold in
//! outgoing messages nobody has read yet (the budget of frames that have only partly arrived is
//! the transport's, in `transport/incoming.rs`).
//!
//! Every message enters a connection's queue only after its bytes are admitted by
//! [`ConnBudget`], and the writer gives them back once they are written to the socket. A
//! connection holds at most its own budget (one message is always admitted into an empty queue,
//! so a response larger than the budget is still delivered, alone). Daemon-wide, every open
//! connection has a guaranteed share that never waits on anyone else; bytes beyond the shares
//! come from a common pool, and once the pool is more than half used only connections that hold
//! no more than an even split of it may take more: the biggest holders wait first, and a client
//! with many sockets cannot crowd out the others.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, mpsc};

use crate::json::Json;

/// The daemon-wide outgoing budget, shared by every connection.
#[derive(Debug)]
pub(crate) struct OutgoingBudget {
    limits: Limits,
    state: Mutex<GlobalState>,
    /// Woken when room appears in the pool (its used part shrinks, or a connection closes), so
    /// that connections waiting on the daemon-wide rule re-check. Not on every write: a write
    /// within a connection's share changes nothing for the others, and waking every waiter of
    /// every connection on each write would let many stalled sockets cost CPU on every honest
    /// write.
    changed: Notify,
}

/// The numbers the admission rule works with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Limits {
    /// Daemon-wide cap on queued outgoing bytes.
    total: usize,
    /// Per-connection cap.
    per_conn: usize,
    /// What every open connection may hold without asking the pool.
    share: usize,
}

/// Daemon-wide accounting, under one lock.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct GlobalState {
    /// Bytes admitted and not yet written, over all connections.
    total: usize,
    /// The part of `total` beyond the connections' guaranteed shares (drawn from the pool).
    excess: usize,
    /// Connections that hold more than their share.
    excess_holders: usize,
    /// Open connections (each reserves a share out of the total).
    open: usize,
}

impl Limits {
    /// Whether a connection holding `used` bytes may queue `n` more, given the daemon's state.
    fn admits(&self, used: usize, n: usize, st: &GlobalState) -> bool {
        // Its own budget; an empty queue always takes one message so that nothing deadlocks on
        // a response larger than the budget.
        if used > 0 && used.saturating_add(n) > self.per_conn {
            return false;
        }
        let new = used.saturating_add(n);
        let old_excess = used.saturating_sub(self.share);
        let grow = new.saturating_sub(self.share) - old_excess;
        if grow == 0 {
            // Inside the guaranteed share: never waits on other connections.
            return true;
        }
        let pool = self.total.saturating_sub(st.open.saturating_mul(self.share));
        if st.excess.saturating_add(grow) > pool {
            // Bigger than what is left. A message bigger than the whole pool goes out alone.
            return st.excess == 0;
        }
        if st.excess + grow > pool / 2 {
            // Tight: only connections within an even split of the pool get more.
            let holders = st.excess_holders + usize::from(old_excess == 0);
            return old_excess + grow <= pool / holders.max(1);
        }
        true
    }
}

impl OutgoingBudget {
    /// A daemon-wide budget of `total` bytes; each connection may hold `per_conn`, and is
    /// guaranteed `total / max_connections` (at most `per_conn`).
    pub(crate) fn new(total: usize, per_conn: usize, max_connections: usize) -> Arc<Self> {
        let per_conn = per_conn.max(1);
        let share = (total / max_connections.max(1)).min(per_conn);
        Arc::new(Self {
            limits: Limits { total, per_conn, share },
            state: Mutex::new(GlobalState::default()),
            changed: Notify::new(),
        })
    }

    /// The guaranteed share of every connection, in bytes.
    pub(crate) fn share(&self) -> usize {
        self.limits.share
    }

    fn lock(&self) -> MutexGuard<'_, GlobalState> {
        // The state is a handful of integers updated in one step; a panic elsewhere cannot
        // leave it half-written, so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Bytes queued over all connections.
    #[cfg(test)]
    pub(crate) fn queued(&self) -> usize {
        self.lock().total
    }

    /// Registers a new connection.
    pub(crate) fn open(self: &Arc<Self>) -> Arc<ConnBudget> {
        self.lock().open += 1;
        Arc::new(ConnBudget {
            global: self.clone(),
            used: AtomicUsize::new(0),
            prepaid: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            stream_turn: Arc::new(Semaphore::new(1)),
            changed: Notify::new(),
        })
    }

    /// Moves a connection from `old` to `new` bytes (both under the lock). Returns whether the
    /// pool's used part shrank.
    fn apply(&self, st: &mut GlobalState, old: usize, new: usize) -> bool {
        let share = self.limits.share;
        let (old_excess, new_excess) = (old.saturating_sub(share), new.saturating_sub(share));
        st.total = st.total - old + new;
        st.excess = st.excess - old_excess + new_excess;
        match (old_excess > 0, new_excess > 0) {
            (false, true) => st.excess_holders += 1,
            (true, false) => st.excess_holders -= 1,
            _ => {}
        }
        new_excess < old_excess
    }
}

/// One connection's part of the outgoing budget.
#[derive(Debug)]
pub(crate) struct ConnBudget {
    global: Arc<OutgoingBudget>,
    /// Bytes admitted for this connection and not yet written (changed under the global lock).
    used: AtomicUsize,
    /// Part of `used` reserved by a stream for a message still on its way to the queue.
    prepaid: AtomicUsize,
    /// After the connection ends nothing is admitted and everything was given back.
    closed: AtomicBool,
    /// One stream at a time cuts a chunk and waits for its bytes, so a connection holds at most
    /// one chunk outside its queue however many streams it has open.
    stream_turn: Arc<Semaphore>,
    /// Woken whenever this connection's bytes go down (or it closes).
    changed: Notify,
}

impl ConnBudget {
    /// Admits `n` bytes if the rules allow it now. `None` when the connection is closed.
    pub(crate) fn try_reserve(&self, n: usize) -> Option<bool> {
        let mut st = self.global.lock();
        if self.closed.load(Ordering::Acquire) {
            return None;
        }
        let used = self.used.load(Ordering::Acquire);
        if !self.global.limits.admits(used, n, &st) {
            return Some(false);
        }
        let _ = self.global.apply(&mut st, used, used + n);
        self.used.store(used + n, Ordering::Release);
        Some(true)
    }

    /// Admits `n` bytes only if this connection holds none now: nothing of it is queued, in
    /// the writer's hands, partly written or reserved by anyone. `false` otherwise, or when the
    /// connection is closed. Whoever gets `true` may write its message straight to the socket
    /// without overtaking anything (see `connection::WriteSide::try_direct`).
    pub(crate) fn try_reserve_idle(&self, n: usize) -> bool {
        let mut st = self.global.lock();
        if self.closed.load(Ordering::Acquire) || self.used.load(Ordering::Acquire) != 0 {
            return false;
        }
        if !self.global.limits.admits(0, n, &st) {
            return false;
        }
        let _ = self.global.apply(&mut st, 0, n);
        self.used.store(n, Ordering::Release);
        true
    }

    /// Admits `n` bytes, waiting as long as the rules say so. `false` when the connection closed.
    pub(crate) async fn reserve(&self, n: usize) -> bool {
        // The common case first: admitted at once, without registering as a waiter.
        match self.try_reserve(n) {
            Some(true) => return true,
            None => return false,
            Some(false) => {}
        }
        loop {
            let room = self.global.changed.notified();
            let own = self.changed.notified();
            tokio::pin!(room, own);
            room.as_mut().enable();
            own.as_mut().enable();
            match self.try_reserve(n) {
                Some(admitted) if admitted => return true,
                Some(_) => {}
                None => return false,
            }
            tokio::select! {
                () = room => {}
                () = own => {}
            }
        }
    }

    /// Gives back `n` written (or dropped) bytes.
    pub(crate) fn release(&self, n: usize) {
        if n == 0 {
            return;
        }
        let pool_shrank = {
            let mut st = self.global.lock();
            if self.closed.load(Ordering::Acquire) {
                return;
            }
            let used = self.used.load(Ordering::Acquire);
            let new = used.saturating_sub(n);
            self.used.store(new, Ordering::Release);
            self.global.apply(&mut st, used, new)
        };
        self.changed.notify_waiters();
        if pool_shrank {
            self.global.changed.notify_waiters();
        }
    }

    /// Whether this connection holds its whole budget (its reader then pauses).
    pub(crate) fn over_budget(&self) -> bool {
        !self.closed.load(Ordering::Acquire)
            && self.used.load(Ordering::Acquire) >= self.global.limits.per_conn
    }

    /// Waits until this connection holds less than its budget (or is closed).
    pub(crate) async fn wait_below_budget(&self) {
        if !self.over_budget() {
            return;
        }
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if !self.over_budget() {
                return;
            }
            notified.await;
        }
    }

    /// Waits until everything this connection queued was written (or it is closed).
    pub(crate) async fn wait_empty(&self) {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.closed.load(Ordering::Acquire) || self.used.load(Ordering::Acquire) == 0 {
                return;
            }
            notified.await;
        }
    }

    /// A stream's turn to cut its next chunk and reserve its bytes; `None` once closed.
    pub(crate) async fn stream_turn(&self) -> Option<OwnedSemaphorePermit> {
        self.stream_turn.clone().acquire_owned().await.ok()
    }

    /// Records `n` reserved bytes that a message will bring to the queue through a path that
    /// cannot reserve itself (jsonrpsee's subscription sink).
    pub(crate) fn prepay(&self, n: usize) {
        self.prepaid.fetch_add(n, Ordering::AcqRel);
    }

    /// Uses up to `n` prepaid bytes for a message arriving from the subscription sink and says
    /// how many; the message reserves the rest itself.
    pub(crate) fn take_prepaid(&self, n: usize) -> usize {
        self.prepaid
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |have| Some(have.saturating_sub(n)))
            .map_or(0, |have| have.min(n))
    }

    /// Returns prepaid bytes whose message never reached the queue.
    pub(crate) fn refund(&self, n: usize) {
        let taken = self
            .prepaid
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |have| Some(have.saturating_sub(n)))
            .map_or(0, |have| have.min(n));
        self.release(taken);
    }

    /// Ends the connection's accounting: gives back everything it holds (queued messages are
    /// dropped with the connection) and wakes whoever waits on it.
    pub(crate) fn close(&self) {
        {
            let mut st = self.global.lock();
            if self.closed.swap(true, Ordering::AcqRel) {
                return;
            }
            let used = self.used.swap(0, Ordering::AcqRel);
            let _ = self.global.apply(&mut st, used, 0);
            st.open -= 1;
        }
        self.stream_turn.close();
        self.changed.notify_waiters();
        // One share fewer is reserved: the pool grew.
        self.global.changed.notify_waiters();
    }
}

impl Drop for ConnBudget {
    fn drop(&mut self) {
        self.close();
    }
}

/// A connection's outgoing queue with its byte budget: the only way messages enter it.
#[derive(Debug, Clone)]
pub(crate) struct Outgoing {
    tx: mpsc::Sender<Json>,
    budget: Arc<ConnBudget>,
}

/// Why a message was not queued without waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum QueueRefused {
    /// No room now (the connection or the daemon is at its budget).
    Full,
    /// The connection is gone.
    Closed,
}

impl Outgoing {
    /// Wraps a queue and its budget.
    pub(crate) fn new(tx: mpsc::Sender<Json>, budget: Arc<ConnBudget>) -> Self {
        Self { tx, budget }
    }

    /// The connection's budget.
    pub(crate) fn budget(&self) -> &Arc<ConnBudget> {
        &self.budget
    }

    /// Queues a message, waiting for its bytes to be admitted and for room in the queue.
    /// `false` when the connection is gone.
    pub(crate) async fn send(&self, json: Json) -> bool {
        let n = json.len();
        if !self.budget.reserve(n).await {
            return false;
        }
        self.send_reserved(json).await
    }

    /// Queues a message whose bytes are already admitted.
    pub(crate) async fn send_reserved(&self, json: Json) -> bool {
        let n = json.len();
        if self.tx.send(json).await.is_err() {
            self.budget.release(n);
            return false;
        }
        true
    }

    /// Resolves when the connection's writer is gone.
    pub(crate) async fn closed(&self) {
        self.tx.closed().await;
    }

    /// Queues a message only if that needs no waiting (notifications: dropped when refused).
    pub(crate) fn try_send(&self, json: Json) -> Result<(), QueueRefused> {
        let n = json.len();
        match self.budget.try_reserve(n) {
            None => return Err(QueueRefused::Closed),
            Some(false) => return Err(QueueRefused::Full),
            Some(true) => {}
        }
        match self.tx.try_send(json) {
            Ok(()) => Ok(()),
            Err(err) => {
                self.budget.release(n);
                match err {
                    mpsc::error::TrySendError::Full(_) => Err(QueueRefused::Full),
                    mpsc::error::TrySendError::Closed(_) => Err(QueueRefused::Closed),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KIB: usize = 1024;

    fn limits() -> Limits {
        Limits { total: 1024 * KIB, per_conn: 512 * KIB, share: 16 * KIB }
    }

    #[test]
    fn a_connection_holds_its_own_budget_and_one_big_message_alone() {
        let l = limits();
        let st = GlobalState { open: 4, ..GlobalState::default() };
        assert!(l.admits(0, 10 * KIB, &st));
        assert!(l.admits(400 * KIB, 112 * KIB, &st));
        assert!(!l.admits(400 * KIB, 113 * KIB, &st), "over its own budget");
        assert!(l.admits(0, 900 * KIB, &st), "an empty queue takes one message of any size");
    }

    #[test]
    fn the_guaranteed_share_never_waits_and_big_holders_wait_first() {
        let l = limits();
        // 8 open connections: pool = 1024 - 8 * 16 = 896 KiB; three holders have most of it.
        let st = GlobalState { total: 800 * KIB, excess: 752 * KIB, excess_holders: 3, open: 8 };
        assert!(l.admits(0, 16 * KIB, &st), "within the share: admitted however full the pool");
        assert!(l.admits(8 * KIB, 8 * KIB, &st));
        assert!(!l.admits(0, 200 * KIB, &st), "the pool cannot hold it");
        // Tight (over half the pool), with room left: a small holder gets it, a big one waits.
        let st = GlobalState { total: 750 * KIB, excess: 650 * KIB, excess_holders: 3, open: 8 };
        assert!(l.admits(0, 100 * KIB, &st), "a new holder within an even split is admitted");
        assert!(!l.admits(400 * KIB, 5 * KIB, &st), "a holder over an even split waits");
        // Not tight: anyone within its own budget.
        let st = GlobalState { total: 200 * KIB, excess: 100 * KIB, excess_holders: 1, open: 8 };
        assert!(l.admits(200 * KIB, 50 * KIB, &st));
    }

    #[test]
    fn a_message_bigger_than_the_pool_goes_out_alone() {
        let l = limits();
        let st = GlobalState { open: 2, ..GlobalState::default() };
        assert!(l.admits(0, 4096 * KIB, &st));
        let busy = GlobalState { total: 40 * KIB, excess: 24 * KIB, excess_holders: 1, open: 2 };
        assert!(!l.admits(0, 4096 * KIB, &busy));
    }

    #[tokio::test]
    async fn bytes_come_back_when_written_and_everything_on_close() {
        let global = OutgoingBudget::new(1024 * KIB, 256 * KIB, 64);
        let a = global.open();
        let b = global.open();
        assert_eq!(a.try_reserve(200 * KIB), Some(true));
        assert_eq!(a.try_reserve(100 * KIB), Some(false));
        assert!(!a.over_budget());
        assert_eq!(b.try_reserve(300 * KIB), Some(true));
        assert_eq!(global.queued(), 500 * KIB);
        a.release(150 * KIB);
        assert_eq!(global.queued(), 350 * KIB);
        a.prepay(10 * KIB);
        assert_eq!(a.take_prepaid(4 * KIB), 4 * KIB);
        assert_eq!(a.take_prepaid(10 * KIB), 6 * KIB);
        assert_eq!(a.take_prepaid(1), 0);
        b.close();
        assert_eq!(b.try_reserve(1), None);
        assert_eq!(global.queued(), 50 * KIB);
        drop(a);
        assert_eq!(global.queued(), 0);
        assert_eq!(global.lock().open, 0);
    }
}
