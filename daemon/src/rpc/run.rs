//! The one runner of the file methods: every handler of `tools/call`, `file/*`, `fs/*`,
//! `journal/*`, `lsp/diagnostics` and `gate/register` names the [`Op`] its request starts, and
//! [`run`] decides from it how the file work runs — right here on the async worker (a warm read,
//! an edit the provider can make at once with no gate registered), on the blocking pool in a
//! fair slot, or through the write-intent gates. A write or edit runs with the gates held
//! ([`crate::gate::Gates::hold`]): [`How`] it runs is a value the runner hands the call, not a
//! closure the gates run.

use std::sync::Arc;

use jsonrpsee::Extensions;
use jsonrpsee::types::ErrorObjectOwned;

use super::slots::FileSlots;
use super::{Cancel, ServerContext, cancelled, internal, session_of};
use crate::context::{FileContext, Files, How, Scope, Step, Who};
use crate::gate::{Asked, Verdict, Writer};
use crate::session::owners::Owner;
use crate::session::{Session, SessionOptions};

/// An operation a request starts: both front doors name one (`tools/call` by its tool, the
/// `file/*`, `fs/*`, `journal/*`, `lsp/diagnostics` and `gate/register` methods by their
/// method), and [`run`] decides from it alone, in one `match`, where its file work runs and
/// whether the gates are asked. The same operation runs the same way whichever door it came
/// in by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    /// A window of a file (`read`, `file/read`, `fs/readText`): right here when the provider
    /// answers it warm (a cached entry holding the file open on a local filesystem, or a small
    /// file read at once), else in a file slot.
    Read,
    /// A file's snapshot opened to stream from (`fs/streamText`; its chunks are cut later, one
    /// at a time): in a file slot.
    Stream,
    /// A whole file written (`write`, `file/write`, `fs/writeText`): in a file slot, through
    /// the gates.
    Write,
    /// An edit (`edit`, `file/edit`, `fs/editText`): right here when the provider can make it
    /// at once (a small file on a local filesystem, both locks free, no fsync) and no gate is
    /// registered; else as [`Op::Write`].
    Edit,
    /// A journal entry's change undone (`journal/restore`) or the owner's last change
    /// (`undo`): as [`Op::Write`].
    Restore,
    /// A file's kind, size and versions (`file/stat`, `fs/stat`) or a path resolved
    /// (`fs/resolve`): in a file slot.
    Stat,
    /// A search (`glob`, `grep`): in a search slot, apart from the file slots.
    Search,
    /// The journal's entries listed or one's diff (`journal/list`, `journal/diff`): in a file
    /// slot.
    Journal,
    /// The file whose diagnostics are asked for (`diagnostics`, `lsp/diagnostics`), resolved
    /// in a file slot; they are waited for afterwards, with nothing held.
    Diagnostics,
    /// A gate's folders resolved (`gate/register`): in a file slot.
    Gate,
}

impl Op {
    /// The operation a tool call starts.
    pub(super) fn of_tool(tool: filectx_protocol::ToolName) -> Self {
        use filectx_protocol::ToolName;
        match tool {
            ToolName::Read => Self::Read,
            ToolName::Write => Self::Write,
            ToolName::Edit => Self::Edit,
            ToolName::Undo => Self::Restore,
            ToolName::Glob | ToolName::Grep => Self::Search,
            ToolName::Diagnostics => Self::Diagnostics,
        }
    }
}

/// Where an operation's file work runs, as [`run`] picks it.
struct Plan {
    /// Tried right here first, and when.
    at_once: Option<AtOnce>,
    /// Else in these slots.
    slots: Slots,
    /// Whether the gates are asked (a change, on the pool, with the gates held).
    gated: bool,
}

/// When an operation is tried right here on the async worker first.
#[derive(Clone, Copy)]
enum AtOnce {
    /// When what it asks can be answered without blocking.
    Warm,
    /// When it can be done without blocking and no gate is registered (the gates held
    /// meanwhile).
    Ungated,
}

/// Which slots an operation waits for on the pool.
#[derive(Clone, Copy)]
enum Slots {
    /// The file slots.
    File,
    /// The search slots, apart from them.
    Search,
}

impl Plan {
    /// How `op` runs: the one place that decides it. `edits_at_once`: whether the provider can
    /// ever make an edit at once (not with fsync on: then an edit goes straight to the pool,
    /// its file resolved once).
    fn of(op: Op, edits_at_once: bool) -> Self {
        let (at_once, slots, gated) = match op {
            Op::Read => (Some(AtOnce::Warm), Slots::File, false),
            Op::Edit => (edits_at_once.then_some(AtOnce::Ungated), Slots::File, true),
            Op::Write | Op::Restore => (None, Slots::File, true),
            Op::Search => (None, Slots::Search, false),
            Op::Stream | Op::Stat | Op::Journal | Op::Diagnostics | Op::Gate => (None, Slots::File, false),
        };
        Self { at_once, slots, gated }
    }
}

/// What a call's file work answers: its answer, or what it needs next ([`Step`]), or its
/// failure on the wire.
pub(super) type StepAnswer<T> = Result<Step<T, ErrorObjectOwned>, ErrorObjectOwned>;

/// Runs `work`, the file work of `op`, with the session's file context (its scope, read-only
/// flag, deny rules and the observations of `owner`; `None`: the session's default owner) and
/// [`How`] it runs (at once, or on the pool with the gates held): where, as [`Plan::of`] says
/// for `op`, and does what its [`Step`] says next. `work` runs a second time only when a try
/// right here answered [`Step::NeedsBlocking`] (it did nothing: nothing was recorded or
/// written): then it runs in a slot. A write a gate watches answers [`Step::NeedsGate`], a
/// change prepared once: the gates are asked about its intent with no slot held, and it is
/// committed (or the refusal answered) in a slot, without running `work` again.
pub(super) async fn run<T, F>(
    ctx: &ServerContext,
    ext: &Extensions,
    op: Op,
    owner: Option<Arc<Owner>>,
    work: F,
) -> Result<T, ErrorObjectOwned>
where
    T: Send + 'static,
    F: Fn(&FileContext<'_>, &SessionOptions, How<'_>) -> StepAnswer<T> + Send + 'static,
{
    let plan = Plan::of(op, ctx.files.edits_at_once());
    // Right here first when the plan allows it. Only a try that answered
    // `Step::NeedsBlocking` (it did nothing) runs `work` again, on the pool.
    if let Some(when) = plan.at_once {
        let tried = at_once(ctx, ext, owner.as_deref(), |files, options| match when {
            // At once only while no gate is registered; the gates held until it is done.
            AtOnce::Ungated => ctx.gates.hold(true).map(|held| work(files, options, held.how())),
            AtOnce::Warm => Some(work(files, options, How::AtOnce)),
        })?;
        match tried {
            Some(Step::NeedsBlocking) | None => {}
            Some(step) => return done(step),
        }
    }
    if plan.gated {
        return through_gates(ctx, ext, owner, work).await;
    }
    let slots = match plan.slots {
        Slots::File => &ctx.file_work,
        Slots::Search => &ctx.search_work,
    };
    let pooled = move |files: &FileContext<'_>, options: &SessionOptions| work(files, options, How::POOL);
    done(in_slot(ctx, ext, slots, owner, pooled).await?)
}

/// The answer of a step that must be done: a call with no gates to ask, in a slot.
fn done<T>(step: Step<T, ErrorObjectOwned>) -> Result<T, ErrorObjectOwned> {
    match step {
        Step::Done(answer) => Ok(answer),
        Step::NeedsBlocking => Err(internal("a call in a file slot asked for the blocking pool")),
        Step::NeedsGate(_) => Err(internal("a call outside the gates asked them")),
    }
}

/// The session's file context: its scope, read-only flag and deny rules, and the observations
/// of `owner` (`None`: the session's default owner).
fn context_of<'a>(
    files: &'a Files,
    session: &'a Session,
    options: &'a SessionOptions,
    owner: Option<&'a Owner>,
) -> FileContext<'a> {
    let scope = Scope { roots: &options.roots, cwd: &options.cwd };
    let observed = owner.map_or_else(|| session.observations(), Owner::observations);
    let who = Who {
        session: session.id(),
        client: options.client.as_ref().map(|client| client.name.as_str()),
        owner: owner.and_then(Owner::name),
    };
    files.context(scope, observed, options.read_only, &options.deny).by(who)
}

/// Runs `work` once right here on the async worker, with the session's file context, when the
/// session's roots are on local filesystems (`work` asks the context for what it can do at
/// once: [`How::AtOnce`]). `None` (after `Ok`) when that cannot answer: the roots are not local, or
/// `work` declined (`None`); a [`Step::NeedsBlocking`] did nothing (nothing was recorded or
/// written).
fn at_once<T>(
    ctx: &ServerContext,
    ext: &Extensions,
    owner: Option<&Owner>,
    work: impl FnOnce(&FileContext<'_>, &SessionOptions) -> Option<StepAnswer<T>>,
) -> Result<Option<Step<T, ErrorObjectOwned>>, ErrorObjectOwned> {
    let session = session_of(ext)?;
    let Some(options) = session.options().filter(|o| o.local_roots) else { return Ok(None) };
    work(&context_of(&ctx.files, &session, options, owner), options).transpose()
}

/// Runs `work` with the session's file context on the blocking pool in one of `slots` (the
/// file slots, or the search slots), shared fairly between sessions. A cancelled request gives
/// up its place in the queue; once it holds a slot, it runs.
async fn in_slot<T, F>(
    ctx: &ServerContext,
    ext: &Extensions,
    slots: &Arc<FileSlots>,
    owner: Option<Arc<Owner>>,
    work: F,
) -> Result<T, ErrorObjectOwned>
where
    T: Send + 'static,
    F: FnOnce(&FileContext<'_>, &SessionOptions) -> Result<T, ErrorObjectOwned> + Send + 'static,
{
    let session = session_of(ext)?;
    let files = ctx.files.clone();
    let _slot = match ext.get::<Cancel>() {
        Some(Cancel(token)) => tokio::select! {
            biased;
            () = token.cancelled() => return Err(cancelled()),
            slot = slots.acquire(session.id()) => slot,
        },
        None => slots.acquire(session.id()).await,
    };
    tokio::task::spawn_blocking(move || {
        let options = session.options().ok_or_else(super::error::not_initialized)?;
        work(&context_of(&files, &session, options, owner.as_deref()), options)
    })
    .await
    .map_err(internal)?
}

/// Runs a write or edit call's `work` once in a file slot through the gates. When a gate
/// watches the file, `work` answers a pending change prepared there; its slot is released, the
/// gates are asked about its intent (no slot, no thread held; `$/cancelRequest` withdraws it
/// and nothing is written), and in a slot again the change is committed ([`Gates::commit`]:
/// asked again first if a gate registered meanwhile covers it) or the refusal is answered.
/// With no gate registered, this is the plain call in a slot.
async fn through_gates<T, F>(
    ctx: &ServerContext,
    ext: &Extensions,
    owner: Option<Arc<Owner>>,
    work: F,
) -> Result<T, ErrorObjectOwned>
where
    T: Send + 'static,
    F: FnOnce(&FileContext<'_>, &SessionOptions, How<'_>) -> StepAnswer<T> + Send + 'static,
{
    let cancel = ext.get::<Cancel>().map(|c| c.0.clone());
    let gates = ctx.gates.clone();
    let mut step = in_slot(ctx, ext, &ctx.file_work, owner.clone(), move |files, options| {
        // On the pool the gates are always held, for as long as it runs.
        let held = gates.hold(false).ok_or_else(|| internal("the gates were not held"))?;
        work(files, options, held.how())
    })
    .await?;
    let mut asked = Asked::default();
    loop {
        let pending = match step {
            Step::NeedsGate(pending) => pending,
            step => return done(step),
        };
        let session = session_of(ext)?;
        let writer = Writer {
            session_id: session.id().to_owned(),
            client_name: session.options().and_then(|o| o.client.as_ref()).map(|c| c.name.clone()),
            owner: owner.as_deref().and_then(Owner::name).map(str::to_owned),
            ended: session.outbound().clone(),
        };
        drop(session);
        let verdict = ctx.gates.ask(pending.intent(), &writer, &mut asked, cancel.as_ref()).await;
        if matches!(verdict, Verdict::Cancelled) || writer.ended.is_closed() {
            // Withdrawn, or the client is gone: nothing it asked for lands after it left.
            return Err(cancelled());
        }
        let (registry, allowed) = (ctx.gates.clone(), asked.clone());
        step = in_slot(ctx, ext, &ctx.file_work, owner.clone(), move |files, _| match verdict {
            Verdict::Allowed => registry.commit(files, pending, &allowed),
            Verdict::Refused(refusal) => pending.refuse(files, refusal).map(Step::Done),
            Verdict::Cancelled => Err(cancelled()),
        })
        .await?;
    }
}
