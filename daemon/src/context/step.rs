//! What a file-context call needs next, instead of an error that is never sent: a read tried at
//! once answers a [`Warm`] (done, or it needs the blocking pool); a write or edit answers a
//! [`Step`] (done, the blocking pool, or the gates' answer to a prepared change, [`Pending`],
//! which is committed once they allowed it, without preparing it again). Here too is the gate
//! step every write and edit goes through: no gate watches the file (the one-step path), or
//! the change is prepared and committed at once (no gate of its operation), or it is pending.

use super::gate::{GateRefusal, Gatekeeper, Intent, Subject, linked};
use super::{ContextError, Conventions, FileContext, ProviderError};
use crate::provider::{ChangeToPrepare, Committed, Expectation, Prepared, Resolved, WriteOutcome};

/// How the runner runs a read, write, edit or restore: its choice, handed to each call of the
/// file context (which holds no mode of its own).
#[derive(Clone, Copy)]
pub enum How<'a> {
    /// On an async worker, for what can be done at once (a warm read, a small edit with no
    /// gate registered): anything more answers [`Warm::NeedsBlocking`] or
    /// [`Step::NeedsBlocking`] having done nothing, and a whole-file write or a restore always
    /// does. The runner gives it to an edit only while it holds the gates (`Gates::hold`) with
    /// no gate registered (and none can be until the edit ends), so an edit at once asks none.
    AtOnce,
    /// On the blocking pool, through the gates `keeper` knows (`None`: none is registered).
    Pool(Option<&'a dyn Gatekeeper>),
}

impl How<'static> {
    /// On the blocking pool with no gate: reads, and what writes nothing.
    pub const POOL: How<'static> = How::Pool(None);
}

impl<'a> How<'a> {
    /// Whether only what can be done at once may be done.
    pub(super) fn at_once(self) -> bool {
        matches!(self, How::AtOnce)
    }

    /// The gates of a call on the pool (none for one at once, which runs only with none).
    pub(super) fn gates(self) -> Option<&'a dyn Gatekeeper> {
        match self {
            How::AtOnce => None,
            How::Pool(keeper) => keeper,
        }
    }
}

impl std::fmt::Debug for How<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            How::AtOnce => f.write_str("AtOnce"),
            How::Pool(keeper) => write!(f, "Pool(gates: {})", keeper.is_some()),
        }
    }
}

/// What a read needs next.
#[derive(Debug)]
pub enum Warm<T> {
    /// It answered.
    Done(T),
    /// It was tried at once ([`How::AtOnce`]) and needs the slow path: nothing was read or
    /// recorded; run it again on the blocking pool.
    NeedsBlocking,
}

impl<T> Warm<T> {
    /// The answer made into `f(answer)`, if there is one.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Warm<U> {
        match self {
            Self::Done(answer) => Warm::Done(f(answer)),
            Self::NeedsBlocking => Warm::NeedsBlocking,
        }
    }

    /// The answer, if the read made one.
    pub fn done(self) -> Option<T> {
        match self {
            Self::Done(answer) => Some(answer),
            Self::NeedsBlocking => None,
        }
    }
}

/// A read's answer made into `f(answer)` where it is: inside the read's `Result`, as a
/// [`Step`] (which a read never leaves at [`Step::NeedsGate`]).
pub trait WarmRead<T, E> {
    /// [`Warm::map`] inside the `Result`, made a [`Step`].
    fn map_warm<U>(self, f: impl FnOnce(T) -> U) -> Result<Step<U, E>, E>;
}

impl<T, E> WarmRead<T, E> for Result<Warm<T>, E> {
    fn map_warm<U>(self, f: impl FnOnce(T) -> U) -> Result<Step<U, E>, E> {
        self.map(|read| read.map(f).into())
    }
}

/// What a write or edit needs next.
pub enum Step<T, E = ContextError> {
    /// It answered (written, or refused by the file context).
    Done(T),
    /// It was tried at once ([`How::AtOnce`]) and needs the slow path: nothing was written or
    /// recorded; run it again on the blocking pool.
    NeedsBlocking,
    /// A gate watches the file: the change is prepared (nothing written) and waits for the
    /// gates' answer to its intent; then [`Pending::commit`] or [`Pending::refuse`] answers.
    NeedsGate(Pending<T, E>),
}

impl<T, E> std::fmt::Debug for Step<T, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Done(_) => f.write_str("Done(..)"),
            Self::NeedsBlocking => f.write_str("NeedsBlocking"),
            Self::NeedsGate(pending) => f.debug_tuple("NeedsGate").field(pending).finish(),
        }
    }
}

impl<T, E> From<Warm<T>> for Step<T, E> {
    fn from(warm: Warm<T>) -> Self {
        match warm {
            Warm::Done(answer) => Self::Done(answer),
            Warm::NeedsBlocking => Self::NeedsBlocking,
        }
    }
}

impl<T: 'static, E: 'static> Step<T, E> {
    /// The answer made into `f(answer)`: now, or once the pending change is committed.
    pub fn map<U: 'static>(self, f: impl FnOnce(T) -> U + Send + 'static) -> Step<U, E> {
        match self {
            Self::Done(answer) => Step::Done(f(answer)),
            Self::NeedsBlocking => Step::NeedsBlocking,
            Self::NeedsGate(pending) => Step::NeedsGate(pending.then(|_, answer| answer.map(f))),
        }
    }

    /// `f` applied to the answer (with `files`): now, or once the pending change is committed
    /// or refused.
    pub fn then<U: 'static, F: 'static>(
        self,
        files: &FileContext<'_>,
        f: impl FnOnce(&FileContext<'_>, Result<T, E>) -> Result<U, F> + Send + 'static,
    ) -> Result<Step<U, F>, F> {
        match self {
            Self::Done(answer) => f(files, Ok(answer)).map(Step::Done),
            Self::NeedsBlocking => Ok(Step::NeedsBlocking),
            Self::NeedsGate(pending) => Ok(Step::NeedsGate(pending.then(f))),
        }
    }

    /// The answer, if the call made one.
    pub fn done(self) -> Option<T> {
        match self {
            Self::Done(answer) => Some(answer),
            Self::NeedsBlocking | Self::NeedsGate(_) => None,
        }
    }
}

/// `f` applied to what a write or edit answered (with `files`), its failure included: now, or
/// once the pending change is committed or refused.
pub fn then<T: 'static, E: 'static, U: 'static, F: 'static>(
    stepped: Result<Step<T, E>, E>,
    files: &FileContext<'_>,
    f: impl FnOnce(&FileContext<'_>, Result<T, E>) -> Result<U, F> + Send + 'static,
) -> Result<Step<U, F>, F> {
    match stepped {
        Ok(step) => step.then(files, f),
        Err(err) => f(files, Err(err)).map(Step::Done),
    }
}

/// A prepared change the gates must allow: its intent, and what its commit needs.
pub(super) struct Proposal {
    /// What the gates are shown (and the bytes to write).
    pub(super) intent: Intent,
    /// The file, as the call resolved it.
    pub(super) target: Resolved,
    /// The version the session saw (or absence), checked again under the locks at the commit.
    pub(super) expect: Expectation,
    /// Whether the session records the change (it marks the file as being written by it
    /// meanwhile); `fs/*` writes record nothing.
    pub(super) recorded: bool,
}

/// A committed change: what was prepared, and what the commit made.
pub(super) struct LandedChange {
    /// The prepared change.
    pub(super) prepared: Prepared,
    /// The commit.
    pub(super) committed: Committed,
}

/// A write or edit prepared against one version of a file a gate watches, waiting for the
/// gates' answer to its [`Intent`]: [`Pending::commit`] writes it (if the file is still at that
/// version), [`Pending::refuse`] answers a refusal; either then makes the call's answer, as the
/// call would have made it at once.
pub struct Pending<T, E = ContextError> {
    proposal: Box<Proposal>,
    answer: Answering<T, E>,
}

/// How a [`Pending`] change makes its answer from what its commit did (with the file context
/// of the commit).
type Answering<T, E> =
    Box<dyn FnOnce(&FileContext<'_>, Result<LandedChange, ContextError>) -> Result<T, E> + Send>;

impl<T, E> std::fmt::Debug for Pending<T, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending").field("intent", &self.proposal.intent).finish_non_exhaustive()
    }
}

impl Pending<LandedChange> {
    /// The change waiting for the gates, answering what its commit made.
    pub(super) fn new(proposal: Proposal) -> Self {
        Self { proposal: Box::new(proposal), answer: Box::new(|_, landed| landed) }
    }
}

impl<T: 'static, E: 'static> Pending<T, E> {
    /// The intent the gates are asked about.
    pub fn intent(&self) -> &Intent {
        &self.proposal.intent
    }

    /// The same change, its answer made into `f(answer)` (with the file context of the commit).
    pub fn then<U, F>(
        self,
        f: impl FnOnce(&FileContext<'_>, Result<T, E>) -> Result<U, F> + Send + 'static,
    ) -> Pending<U, F> {
        let Self { proposal, answer } = self;
        Pending { proposal, answer: Box::new(move |files, landed| f(files, answer(files, landed))) }
    }

    /// Commits the change the gates allowed, through the provider's critical section (the
    /// version guard under the path lock and the file lock, against the version the gates
    /// were shown), and answers; unless a gate `keeper` knows covers it has not been asked yet
    /// (registered meanwhile): then the change waits for the gates again.
    pub fn commit(self, files: &FileContext<'_>, keeper: &dyn Gatekeeper) -> Result<Step<T, E>, E> {
        if keeper.unasked(self.proposal.intent.subject(), self.proposal.intent.operation) {
            return Ok(Step::NeedsGate(self));
        }
        let Self { proposal, answer } = self;
        let Proposal { intent, target, expect, recorded } = *proposal;
        let _writing = recorded.then(|| files.observed.writing(&target.path));
        let landed = match files.provider.commit(&target, &intent.prepared, expect) {
            Ok(committed) => Ok(LandedChange { prepared: intent.prepared, committed }),
            Err(err) => Err(ContextError::from(err)),
        };
        answer(files, landed).map(Step::Done)
    }

    /// Answers the gate's `refusal`: nothing is written.
    pub fn refuse(self, files: &FileContext<'_>, refusal: GateRefusal) -> Result<T, E> {
        let path = self.proposal.target.display.clone();
        (self.answer)(files, Err(ContextError::GateRefused { path, refusal }))
    }
}

/// How a write or edit went through the gate step.
pub(super) enum Passage {
    /// No gate watches the file: the one-step path.
    Direct,
    /// Committed through the two-step path (a gate watches the file, but no gate of this
    /// operation).
    Done(Prepared, Committed),
    /// Prepared: the gates must be asked first.
    Asking(Pending<LandedChange>),
}

impl super::FileContext<'_> {
    /// Writes `content` as the whole of `target` if `expect` holds, through the gate step: what
    /// the write did, or what it waits for (the gates' answer to its prepared change, which
    /// answers what the commit did), or why not — the provider's refusal (an unmet `expect` is
    /// [`ProviderError::StaleVersion`] or [`ProviderError::AlreadyExists`] inside
    /// [`ContextError::File`]). `recorded`: the session records the write; `gates`: the gates
    /// registered (see [`How::Pool`]).
    pub(super) fn write_gated(
        &self,
        target: &Resolved,
        content: &str,
        expect: Expectation,
        conventions: Conventions,
        recorded: bool,
        gates: Option<&dyn Gatekeeper>,
    ) -> Result<Step<WriteOutcome>, ContextError> {
        let max_old = self.provider.store().max_file_bytes();
        let prepare = || {
            let change = ChangeToPrepare::Write { content, expect, conventions, max_old };
            self.provider.prepare(target, change)
        };
        Ok(match self.through_gate(target, expect, recorded, gates, prepare)? {
            Passage::Direct => Step::Done(self.provider.write(target, content, expect, conventions)?),
            Passage::Done(prepared, done) => Step::Done(written(prepared, done)),
            Passage::Asking(pending) => Step::NeedsGate(
                pending.then(|_, landed| landed.map(|landed| written(landed.prepared, landed.committed))),
            ),
        })
    }

    /// Runs the gate step (if any) of a write or edit of `target` that `prepare` would prepare
    /// and `expect` guards: with no gate watching the file, the one-step path; else the change
    /// prepared, and committed at once when no gate of its operation covers it. `gates`: those
    /// registered (`None`: none).
    pub(super) fn through_gate(
        &self,
        target: &Resolved,
        expect: Expectation,
        recorded: bool,
        gates: Option<&dyn Gatekeeper>,
        prepare: impl FnOnce() -> Result<Prepared, ProviderError>,
    ) -> Result<Passage, ProviderError> {
        let Some(keeper) = gates else { return Ok(Passage::Direct) };
        if !keeper.watches(Subject { path: &target.path, linked: linked(target) }) {
            return Ok(Passage::Direct);
        }
        let intent = Intent::new(target, prepare()?, self.provider.store().max_file_bytes());
        if keeper.unasked(intent.subject(), intent.operation) {
            let proposal = Proposal { intent, target: target.clone(), expect, recorded };
            return Ok(Passage::Asking(Pending::new(proposal)));
        }
        let committed = self.provider.commit(target, &intent.prepared, expect)?;
        Ok(Passage::Done(intent.prepared, committed))
    }
}

/// What a write committed through the gate step did.
fn written(prepared: Prepared, done: Committed) -> WriteOutcome {
    WriteOutcome {
        created: done.created,
        version: done.version,
        links: done.links,
        converted: Some(prepared.bytes),
        entry: done.entry,
    }
}
