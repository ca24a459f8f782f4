//! Fair sharing of the daemon's file-work slots between sessions.
//!
//! File operations (open, hash, map, read, write) run on the blocking pool, and only a few per
//! core are worth running at once. One daemon-wide FIFO semaphore let a single session with many
//! slow requests in flight (hashing huge files) hold every slot, so another session's 13-byte
//! read waited for them all. [`FileSlots`] hands slots out so that no session crowds out the
//! others:
//!
//! - **Headroom:** one session never holds more than `total - 1` slots (when `total` ≥ 2), so a
//!   request of any other session finds a free slot at once even while one session keeps many
//!   slow requests in flight.
//! - **Fair order:** when a slot frees and several sessions wait, it goes to the next waiting
//!   session (round-robin) that holds fewer than its share (`total / active sessions`, rounded
//!   up); only when every waiting session holds its share does it go to the next one in turn.
//!   Within one session requests are served in the order they asked.
//! - **Work-conserving otherwise:** a free slot never stays free while a session that may take it
//!   waits.
//!
//! Slots are not preempted: a session that took many slots while alone keeps them until its
//! requests finish, but every slot it gives back goes to the others first.
//!
//! Bounded: a session waits with at most the requests its connection has in flight (the
//! transport's `--max-concurrent-requests`, plus its open subscriptions), and sessions are
//! bounded by the connection cap; nothing is queued beyond those.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::oneshot;

/// Who a slot is for: a session's id.
type Owner = Arc<str>;

/// One session's holdings and its waiting requests (oldest first).
#[derive(Debug, Default)]
struct Holder {
    held: usize,
    waiting: VecDeque<(u64, oneshot::Sender<()>)>,
}

#[derive(Debug, Default)]
struct State {
    free: usize,
    holders: HashMap<Owner, Holder>,
    /// Sessions with waiting requests, in turn order (the front is served next).
    turns: VecDeque<Owner>,
    next_ticket: u64,
    waiting: usize,
}

/// The daemon's file-work slots, shared fairly between sessions (see the module docs).
#[derive(Debug)]
pub struct FileSlots {
    total: usize,
    state: Mutex<State>,
}

/// A held slot; dropping it gives the slot back (to the next session in fair order).
#[derive(Debug)]
pub struct Permit {
    slots: Arc<FileSlots>,
    owner: Owner,
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut state = self.slots.lock();
        self.slots.release(&mut state, &self.owner);
    }
}

/// A request waiting in its session's queue; dropping it (the request was cancelled) takes it
/// out of the queue, or gives back the slot it was granted meanwhile.
struct Waiting<'a> {
    slots: &'a Arc<FileSlots>,
    owner: Owner,
    ticket: u64,
    armed: bool,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let mut state = self.slots.lock();
        let still_queued = state.holders.get_mut(&self.owner).and_then(|holder| {
            let at = holder.waiting.iter().position(|(ticket, _)| *ticket == self.ticket)?;
            holder.waiting.remove(at)
        });
        if still_queued.is_some() {
            state.waiting -= 1;
            self.slots.tidy(&mut state, &self.owner);
        } else {
            // Granted (under the lock) but never picked up: give it back.
            self.slots.release(&mut state, &self.owner);
        }
    }
}

/// How busy the slots are, for `daemon/status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotUse {
    /// Slots in all.
    pub total: usize,
    /// Slots held now.
    pub busy: usize,
    /// Requests waiting for one.
    pub waiting: usize,
}

impl FileSlots {
    /// `total` slots (at least one).
    pub fn new(total: usize) -> Arc<Self> {
        let total = total.max(1);
        Arc::new(Self { total, state: Mutex::new(State { free: total, ..State::default() }) })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Most slots one session may hold: all but one, so another session always finds one.
    fn cap(&self) -> usize {
        if self.total >= 2 { self.total - 1 } else { 1 }
    }

    /// How busy the slots are now.
    pub fn usage(&self) -> SlotUse {
        let state = self.lock();
        SlotUse { total: self.total, busy: self.total - state.free, waiting: state.waiting }
    }

    /// Waits for a slot for the session `owner`.
    pub async fn acquire(self: &Arc<Self>, owner: &str) -> Permit {
        let owner: Owner = Arc::from(owner);
        let (ticket, granted) = {
            let mut state = self.lock();
            let cap = self.cap();
            let holder = state.holders.entry(owner.clone()).or_default();
            // A free slot means nobody who may take it is waiting (grants happen as slots free).
            if holder.waiting.is_empty() && holder.held < cap && state.free > 0 {
                state.free -= 1;
                if let Some(holder) = state.holders.get_mut(&owner) {
                    holder.held += 1;
                }
                return Permit { slots: self.clone(), owner };
            }
            let (tx, rx) = oneshot::channel();
            let ticket = state.next_ticket;
            state.next_ticket += 1;
            state.waiting += 1;
            if let Some(holder) = state.holders.get_mut(&owner) {
                holder.waiting.push_back((ticket, tx));
            }
            if !state.turns.contains(&owner) {
                state.turns.push_back(owner.clone());
            }
            (ticket, rx)
        };
        let mut waiting = Waiting { slots: self, owner, ticket, armed: true };
        // The sender lives in the queue until it is used (a grant) or removed by `Waiting`'s
        // drop, which cannot run while we await here: it always delivers.
        let _ = granted.await;
        waiting.armed = false;
        Permit { slots: self.clone(), owner: waiting.owner.clone() }
    }

    /// Gives back one slot of `owner` and hands free slots to waiting sessions.
    fn release(&self, state: &mut State, owner: &Owner) {
        if let Some(holder) = state.holders.get_mut(owner) {
            holder.held = holder.held.saturating_sub(1);
        }
        state.free = (state.free + 1).min(self.total);
        self.tidy(state, owner);
        self.dispatch(state);
    }

    /// Forgets `owner` once it holds and waits for nothing.
    fn tidy(&self, state: &mut State, owner: &Owner) {
        if state.holders.get(owner).is_some_and(|h| h.held == 0 && h.waiting.is_empty()) {
            state.holders.remove(owner);
        }
        if state.holders.get(owner).is_none_or(|h| h.waiting.is_empty()) {
            state.turns.retain(|o| o != owner);
        }
    }

    /// Grants free slots to waiting sessions in fair order (see the module docs).
    fn dispatch(&self, state: &mut State) {
        let cap = self.cap();
        while state.free > 0 {
            let share = self.total.div_ceil(state.holders.len().max(1));
            let held = |state: &State, owner: &Owner| state.holders.get(owner).map_or(0, |h| h.held);
            let pick = state
                .turns
                .iter()
                .position(|o| held(state, o) < share.min(cap))
                .or_else(|| state.turns.iter().position(|o| held(state, o) < cap));
            let Some(at) = pick else { return };
            let Some(owner) = state.turns.remove(at) else { return };
            let Some(holder) = state.holders.get_mut(&owner) else { continue };
            let Some((_, tx)) = holder.waiting.pop_front() else { continue };
            holder.held += 1;
            let more = !holder.waiting.is_empty();
            state.free -= 1;
            state.waiting -= 1;
            // The waiter removes itself under this lock before it goes away, so it is there.
            let _ = tx.send(());
            if more {
                // Its next request waits for its next turn, behind every other session.
                state.turns.push_back(owner);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::Pin;

    use futures::FutureExt;

    use super::*;

    type Pending = Pin<Box<dyn Future<Output = Permit>>>;

    fn ask(slots: &Arc<FileSlots>, owner: &'static str) -> Pending {
        let slots = slots.clone();
        Box::pin(async move { slots.acquire(owner).await })
    }

    /// Asks for a slot and polls once: `Ok` when granted at once, else the pending request.
    fn try_take(slots: &Arc<FileSlots>, owner: &'static str) -> Result<Permit, Pending> {
        let mut pending = ask(slots, owner);
        match (&mut pending).now_or_never() {
            Some(permit) => Ok(permit),
            None => Err(pending),
        }
    }

    /// A slot that must be granted at once.
    fn take(slots: &Arc<FileSlots>, owner: &'static str) -> Permit {
        try_take(slots, owner).unwrap_or_else(|_| panic!("{owner} had to wait"))
    }

    /// A request that must wait.
    fn wait(slots: &Arc<FileSlots>, owner: &'static str) -> Pending {
        match try_take(slots, owner) {
            Ok(_) => panic!("{owner} was served at once"),
            Err(pending) => pending,
        }
    }

    fn poll(pending: &mut Pending) -> Option<Permit> {
        pending.now_or_never()
    }

    /// The permits granted to `queue`'s requests so far (those leave the queue).
    fn granted(queue: &mut Vec<Pending>) -> Vec<Permit> {
        let mut permits = Vec::new();
        queue.retain_mut(|pending| match poll(pending) {
            Some(permit) => {
                permits.push(permit);
                false
            }
            None => true,
        });
        permits
    }

    #[test]
    fn one_session_leaves_one_slot_for_the_others() {
        let slots = FileSlots::new(4);
        let held: Vec<Permit> = (0..3).map(|_| take(&slots, "a")).collect();
        let mut a4 = wait(&slots, "a");
        assert_eq!(slots.usage(), SlotUse { total: 4, busy: 3, waiting: 1 });
        // Another session finds the spare slot at once.
        let b = take(&slots, "b");
        assert_eq!(slots.usage(), SlotUse { total: 4, busy: 4, waiting: 1 });
        drop(b);
        assert!(poll(&mut a4).is_none(), "the spare slot is never a's fourth");
        assert_eq!(slots.usage(), SlotUse { total: 4, busy: 3, waiting: 1 });
        drop(held);
        assert!(poll(&mut a4).is_some());
        assert_eq!(slots.usage(), SlotUse { total: 4, busy: 0, waiting: 0 });
        assert!(slots.lock().holders.is_empty() && slots.lock().turns.is_empty());
    }

    #[test]
    fn a_freed_slot_goes_to_the_session_under_its_share_first() {
        let slots = FileSlots::new(4);
        let mut a_held: Vec<Permit> = (0..3).map(|_| take(&slots, "a")).collect();
        let mut a_waiting: Vec<Pending> = (0..5).map(|_| wait(&slots, "a")).collect();
        let _b1 = take(&slots, "b");
        // b now asks for more, after a's five.
        let mut b_waiting: Vec<Pending> = (0..2).map(|_| wait(&slots, "b")).collect();
        assert_eq!(slots.usage(), SlotUse { total: 4, busy: 4, waiting: 7 });
        // a holds 3 of 4 (its share is 2), b holds 1: a's freed slot goes to b, queued later.
        a_held.pop();
        let _b2 = granted(&mut b_waiting);
        assert_eq!((_b2.len(), granted(&mut a_waiting).len()), (1, 0));
        // Both now hold 2, their share: turns alternate, and b just had one, so a goes next.
        a_held.pop();
        let _a4 = granted(&mut a_waiting);
        assert_eq!((_a4.len(), granted(&mut b_waiting).len()), (1, 0));
        assert_eq!(slots.usage(), SlotUse { total: 4, busy: 4, waiting: 5 });
    }

    #[test]
    fn round_robin_between_waiting_sessions() {
        let slots = FileSlots::new(2);
        let mut permits = vec![take(&slots, "x"), take(&slots, "y")];
        let mut a: Vec<Pending> = (0..3).map(|_| wait(&slots, "a")).collect();
        let mut b: Vec<Pending> = (0..3).map(|_| wait(&slots, "b")).collect();
        let mut order = Vec::new();
        for _ in 0..6 {
            permits.remove(0);
            for (name, queue) in [("a", &mut a), ("b", &mut b)] {
                for permit in granted(queue) {
                    order.push(name);
                    permits.push(permit);
                }
            }
        }
        assert_eq!(order, ["a", "b", "a", "b", "a", "b"]);
        assert_eq!(slots.usage(), SlotUse { total: 2, busy: 2, waiting: 0 });
    }

    #[test]
    fn cancelled_requests_leave_the_queue_and_grants_are_not_lost() {
        let slots = FileSlots::new(2);
        let a = take(&slots, "a");
        let b = take(&slots, "b");
        let c = wait(&slots, "c");
        drop(c);
        assert_eq!(slots.usage(), SlotUse { total: 2, busy: 2, waiting: 0 });
        // Granted while nobody polled, then cancelled: the slot comes back.
        let d = wait(&slots, "d");
        drop(a);
        assert_eq!(slots.usage(), SlotUse { total: 2, busy: 2, waiting: 0 });
        drop(d);
        assert_eq!(slots.usage(), SlotUse { total: 2, busy: 1, waiting: 0 });
        drop(b);
        assert_eq!(slots.usage(), SlotUse { total: 2, busy: 0, waiting: 0 });
        assert!(slots.lock().holders.is_empty() && slots.lock().turns.is_empty());
    }

    #[test]
    fn a_single_slot_is_shared_in_turn() {
        let slots = FileSlots::new(1);
        let a = take(&slots, "a");
        let mut a2 = vec![wait(&slots, "a")];
        let mut b = vec![wait(&slots, "b")];
        drop(a);
        let a2_permit = granted(&mut a2);
        assert_eq!(a2_permit.len(), 1, "first come, first served when neither holds anything");
        assert!(granted(&mut b).is_empty());
        drop(a2_permit);
        assert_eq!(granted(&mut b).len(), 1);
    }
}
